#pragma once
// Any of the three checkpoint formats bertlab reads, recognised by content: a TensorFlow
// checkpoint (Google's bert_model.ckpt), a torch.save zip (Hugging Face's pytorch_model.bin) or
// safetensors.

#include <bertlab/io/safetensors.h>

#include <filesystem>
#include <map>
#include <string>

namespace bertlab {

enum class CheckpointFormat { kTensorFlow, kPyTorch, kSafetensors };

/// "tensorflow", "pytorch", "safetensors".
const char* to_string(CheckpointFormat format);

/// Where a checkpoint is, and in which format.
struct CheckpointLocation {
  CheckpointFormat format = CheckpointFormat::kSafetensors;
  std::filesystem::path file;  ///< the file read first (a TF checkpoint's .index)
};

/// Finds the checkpoint `path` names: a file of any format (whatever its extension), a TF
/// prefix (`.../bert_model.ckpt`), or a folder holding exactly one of model.safetensors,
/// pytorch_model.bin or a `*.ckpt.index`. Throws DataError saying what was looked for.
CheckpointLocation locate_checkpoint(const std::filesystem::path& path);

/// A checkpoint's tensors under the names it stores them.
struct Checkpoint {
  CheckpointLocation location;
  NamedTensors tensors;                         ///< CPU, in the file's order
  std::map<std::string, std::string> metadata;  ///< safetensors __metadata__ (else empty)
};

/// Locates and reads a whole checkpoint. Throws DataError for anything unreadable.
Checkpoint read_checkpoint(const std::filesystem::path& path);

}  // namespace bertlab
