#pragma once
// A run's variant as a Hugging Face model folder (`bertlab export --hf`, [experiment] export_hf):
// config.json as transformers writes it for the task's model class, model.safetensors under that
// class's parameter names, and the tokenizer's vocab.txt, tokenizer_config.json and
// special_tokens_map.json, so that `from_pretrained(folder)` opens it as it is.

#include <bertlab/task.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace bertlab {

/// The entries of model.safetensors' metadata that the export reads: the task's model class and
/// labels, and the tokenizer the variant trained with (its vocabulary's absolute path).
std::map<std::string, std::string> hf_export_metadata(const HfModelHead& head,
                                                      const std::filesystem::path& vocab_file,
                                                      bool do_lower_case);

struct HfExportOptions {
  std::filesystem::path variant_dir;  ///< RUN_DIR/VARIANT: holds model.safetensors
  std::filesystem::path out_dir;      ///< created when missing; the five files are replaced
  /// The vocabulary to write; default: the one the variant trained with (the metadata's).
  std::optional<std::filesystem::path> vocab_file;
};

/// What was written.
struct HfExportResult {
  std::string architecture;  ///< transformers' class in config.json
  int64_t tensors = 0;       ///< in the exported model.safetensors
  int64_t labels = 0;        ///< id2label entries (classification)
};

/// Writes the folder; each file atomically. Throws DataError (a missing or unreadable file) or
/// ConfigError (no vocabulary known, a vocabulary larger than the model's) naming what to do.
HfExportResult export_hf(const HfExportOptions& options);

}  // namespace bertlab
