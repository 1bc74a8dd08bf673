#include "host/inspect.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/safetensors.h>
#include <fmt/format.h>

#include <fstream>

namespace bertlab {

namespace {

/// safetensors begins with a little-endian header length followed by '{'.
bool looks_like_safetensors(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[9] = {};
  in.read(head, 9);
  return in.gcount() == 9 && head[8] == '{';
}

}  // namespace

int inspect_checkpoint(const std::filesystem::path& path, bool stats, std::ostream& out) {
  BERTLAB_CHECK_AS(DataError, std::filesystem::is_regular_file(path), "{}: no such file",
                   path.string());
  BERTLAB_CHECK_AS(DataError, looks_like_safetensors(path),
                   "{}: not a safetensors file; this version of bertlab inspects safetensors "
                   "only",
                   path.string());
  std::map<std::string, std::string> metadata;
  NamedTensors tensors = read_safetensors(path, &metadata);
  int64_t total = 0;
  for (const auto& [name, t] : tensors) total += t.numel();
  out << fmt::format("{}: safetensors, {} tensors, {} parameters\n", path.string(), tensors.size(),
                     total);
  for (const auto& [key, value] : metadata) {
    out << fmt::format("metadata {} = {}\n", key,
                       value.size() > 80 ? value.substr(0, 77) + "..." : value);
  }
  for (const auto& [name, t] : tensors) {
    std::string line = fmt::format("{:<60} {:<9} [{}]", name, c10::toString(t.scalar_type()),
                                   fmt::join(t.sizes(), ", "));
    if (stats && t.numel() > 0 && at::isFloatingType(t.scalar_type())) {
      const at::Tensor d = t.to(at::kDouble);
      line += fmt::format("  mean {:.6g} std {:.6g} min {:.6g} max {:.6g}", d.mean().item<double>(),
                          t.numel() > 1 ? d.std().item<double>() : 0.0, d.min().item<double>(),
                          d.max().item<double>());
    }
    out << line << "\n";
  }
  return 0;
}

}  // namespace bertlab
