// `bertlab inspect` and `bertlab convert`: reading checkpoints of any supported format.

#include "commands/inspect.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/checkpoint.h>
#include <bertlab/io/safetensors.h>
#include <bertlab/model/bert.h>
#include <bertlab/model/weight_names.h>
#include <fmt/format.h>

#include <map>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

/// The bert_config beside a checkpoint: Google's bert_config.json or Hugging Face's config.json.
std::optional<fs::path> config_beside(const fs::path& checkpoint_file) {
  for (const char* name : {"bert_config.json", "config.json"}) {
    const fs::path candidate = checkpoint_file.parent_path() / name;
    if (fs::is_regular_file(candidate)) return candidate;
  }
  return std::nullopt;
}

}  // namespace

int inspect_checkpoint(const fs::path& path, bool stats, std::ostream& out) {
  Checkpoint ckpt = read_checkpoint(path);
  int64_t total = 0;
  for (const auto& [name, t] : ckpt.tensors) total += t.numel();
  out << fmt::format("{}: {}, {} tensors, {} parameters\n", ckpt.location.file.string(),
                     to_string(ckpt.location.format), ckpt.tensors.size(), total);
  for (const auto& [key, value] : ckpt.metadata) {
    out << fmt::format("metadata {} = {}\n", key,
                       value.size() > 80 ? value.substr(0, 77) + "..." : value);
  }
  for (const auto& [name, t] : ckpt.tensors) {
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

int convert_checkpoint(const ConvertOptions& options, std::ostream& out) {
  BERTLAB_CHECK_AS(ConfigError, options.names == "hf" || options.names == "google",
                   "convert --names: '{}' is not a naming scheme; use hf or google", options.names);
  Checkpoint ckpt = read_checkpoint(options.from);
  std::vector<SkippedTensor> skipped;
  NamedTensors weights = to_bertlab_names(ckpt, &skipped);
  if (options.names == "google") weights = to_google_names(weights, &skipped);
  BERTLAB_CHECK_AS(DataError, !weights.empty(), "{}: no BERT weights found among its {} tensors",
                   ckpt.location.file.string(), ckpt.tensors.size());

  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"bertlab_names", options.names},
                                                 {"converted_from", ckpt.location.file.string()}};
  std::optional<fs::path> config = options.bert_config;
  if (!config) config = config_beside(ckpt.location.file);
  if (config) {
    metadata["bert_config"] = BertConfig::from_json_file(*config).to_json();
  } else if (ckpt.metadata.count("bert_config") != 0) {
    metadata["bert_config"] = ckpt.metadata.at("bert_config");
  }
  write_safetensors(options.to, weights, metadata);

  std::map<std::string, int> reasons;
  for (const auto& s : skipped) ++reasons[s.reason];
  out << fmt::format("{} ({}, {} tensors) -> {}: {} tensors, {} names{}\n",
                     ckpt.location.file.string(), to_string(ckpt.location.format),
                     ckpt.tensors.size(), options.to.string(), weights.size(), options.names,
                     config ? fmt::format(", bert_config from {}", config->string()) : "");
  for (const auto& [reason, n] : reasons) out << fmt::format("  skipped {} {}\n", n, reason);
  for (const auto& s : skipped) {
    if (s.reason == "unknown name" || s.reason == "no Google name") {
      out << fmt::format("  skipped {} ({})\n", s.name, s.reason);
    }
  }
  return 0;
}

}  // namespace bertlab
