#pragma once
// `bertlab convert`: any checkpoint (TF, pytorch_model.bin, safetensors) to safetensors under
// bertlab (Hugging Face) or Google names.

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

namespace bertlab {

struct ConvertOptions {
  std::filesystem::path from;  ///< checkpoint in any format
  std::filesystem::path to;    ///< OUT.safetensors
  std::string names = "hf";    ///< hf: bertlab / Hugging Face names; google: TF names and layouts
  /// bert_config.json for the metadata; default: bert_config.json or config.json beside `from`.
  std::optional<std::filesystem::path> bert_config;
};

/// Converts; prints what was written and skipped; returns 0.
int convert_checkpoint(const ConvertOptions& options, std::ostream& out);

}  // namespace bertlab
