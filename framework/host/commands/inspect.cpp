// `bertlab inspect CHECKPOINT`: the tensors of a checkpoint of any supported format.

#include "commands/inspect.h"

#include <ATen/core/Tensor.h>
#include <bertlab/error.h>
#include <bertlab/io/checkpoint.h>
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands/commands.h"

namespace bertlab {

namespace fs = std::filesystem;

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

namespace {

struct InspectArgs {
  std::string checkpoint;  ///< the file
  bool stats = false;      ///< --stats
};

}  // namespace

Command define_inspect_command(CommandLine& parent, PluginOptions& /*plugins*/) {
  auto args = std::make_shared<InspectArgs>();
  CommandLine command = parent.subcommand("inspect", "list the tensors of a checkpoint");
  command.positional("checkpoint", args->checkpoint,
                     "TF checkpoint (bert_model.ckpt), pytorch_model.bin or .safetensors");
  command.flag("--stats", args->stats, "add mean, std, min and max of each tensor");
  return {command, [args] { return inspect_checkpoint(args->checkpoint, args->stats, std::cout); }};
}

}  // namespace bertlab
