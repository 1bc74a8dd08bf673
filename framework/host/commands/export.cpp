// `bertlab export --hf RUN_DIR/VARIANT OUT_DIR`: a finished variant as a Hugging Face folder
// that transformers' from_pretrained opens as it is (report/hf_export.h).

#include <bertlab/error.h>
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands/commands.h"
#include "report/hf_export.h"

namespace bertlab {

namespace {

struct ExportArgs {
  bool hf = false;
  std::string variant_dir;
  std::string out_dir;
  std::string vocab;  ///< --vocab; empty: the run's
};

}  // namespace

Command define_export_command(CommandLine& parent, PluginOptions& /*plugins*/) {
  auto args = std::make_shared<ExportArgs>();
  CommandLine command =
      parent.subcommand("export", "write a run's variant as a Hugging Face model folder");
  command.flag("--hf", args->hf,
               "Hugging Face transformers: config.json, model.safetensors, vocab.txt, "
               "tokenizer_config.json, special_tokens_map.json");
  command.positional("RUN_DIR/VARIANT", args->variant_dir,
                     "a variant's folder of a finished run (holds model.safetensors)");
  command.positional("OUT_DIR", args->out_dir, "the folder to write (created when missing)");
  command.option("--vocab", args->vocab,
                 "vocabulary to write (default: the [model] vocab_file the run trained with)");
  return {command, [args] {
            BERTLAB_CHECK_AS(ConfigError, args->hf,
                             "export: say the format; --hf is the one there is (bertlab export "
                             "--hf RUN_DIR/VARIANT OUT_DIR)");
            HfExportOptions options;
            options.variant_dir = args->variant_dir;
            options.out_dir = args->out_dir;
            if (!args->vocab.empty()) options.vocab_file = args->vocab;
            const HfExportResult result = export_hf(options);
            std::cout << fmt::format(
                "{} -> {}: {}, {} tensors{}\n", args->variant_dir, args->out_dir,
                result.architecture, result.tensors,
                result.labels > 0 ? fmt::format(", {} labels", result.labels) : std::string());
            return 0;
          }};
}

}  // namespace bertlab
