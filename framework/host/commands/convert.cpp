// `bertlab convert --from CHECKPOINT --to OUT.safetensors`: any checkpoint as safetensors,
// under bertlab (Hugging Face) or Google names, with its bert_config in the metadata.

#include "commands/convert.h"

#include <bertlab/error.h>
#include <bertlab/io/checkpoint.h>
#include <bertlab/io/safetensors.h>
#include <bertlab/model/bert_config.h>
#include <bertlab/model/weight_names.h>
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <memory>

#include "commands/commands.h"

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

namespace {

struct ConvertArgs {
  ConvertOptions options;
  std::string from;         ///< --from
  std::string to;           ///< --to
  std::string bert_config;  ///< --bert-config; empty: the one beside --from
};

}  // namespace

Command define_convert_command(CommandLine& parent, PluginOptions& /*plugins*/) {
  auto args = std::make_shared<ConvertArgs>();
  CommandLine command = parent.subcommand("convert", "write any checkpoint as safetensors");
  command.required_option("--from", args->from,
                          "TF checkpoint (bert_model.ckpt), pytorch_model.bin or .safetensors");
  command.required_option("--to", args->to, "OUT.safetensors");
  command.option("--names", args->options.names,
                 "hf: Hugging Face / bertlab names (default); google: TF names and layouts");
  command.option("--bert-config", args->bert_config,
                 "bert_config.json for the metadata (default: the one beside --from)");
  return {command, [args] {
            ConvertOptions options = args->options;
            options.from = args->from;
            options.to = args->to;
            if (!args->bert_config.empty()) options.bert_config = fs::path(args->bert_config);
            return convert_checkpoint(options, std::cout);
          }};
}

}  // namespace bertlab
