#include <bertlab/error.h>
#include <bertlab/io/checkpoint.h>
#include <bertlab/io/tf_checkpoint.h>
#include <bertlab/io/torch_checkpoint.h>

#include <fstream>
#include <optional>
#include <vector>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

/// safetensors begins with a little-endian header length followed by '{'.
bool is_safetensors_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char head[9] = {};
  in.read(head, 9);
  return in.gcount() == 9 && head[8] == '{';
}

std::optional<CheckpointFormat> format_of_file(const fs::path& file) {
  if (is_safetensors_file(file)) return CheckpointFormat::kSafetensors;
  if (is_zip_file(file)) return CheckpointFormat::kPyTorch;
  if (is_tf_checkpoint_index(file)) return CheckpointFormat::kTensorFlow;
  // A shard of a TF checkpoint is raw bytes: recognised by its name next to its index.
  if (file.filename().string().find(".data-") != std::string::npos) {
    try {
      return is_tf_checkpoint_index(tf_checkpoint_index_path(file))
                 ? std::optional(CheckpointFormat::kTensorFlow)
                 : std::nullopt;
    } catch (const DataError&) {
      return std::nullopt;
    }
  }
  // A legacy torch.save file is a bare pickle (protocol 2 starts 0x80 0x02): the PyTorch reader
  // explains what to do with it.
  std::ifstream in(file, std::ios::binary);
  unsigned char head[2] = {};
  in.read(reinterpret_cast<char*>(head), 2);
  if (in.gcount() == 2 && head[0] == 0x80 && head[1] <= 5) return CheckpointFormat::kPyTorch;
  return std::nullopt;
}

CheckpointLocation locate_in_folder(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const char* name : {"model.safetensors", "pytorch_model.bin"}) {
    if (fs::is_regular_file(dir / name)) found.push_back(dir / name);
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".index") == 0) {
      found.push_back(entry.path());
    }
  }
  BERTLAB_CHECK_AS(DataError, !found.empty(),
                   "{}: a folder without a checkpoint: looked for model.safetensors, "
                   "pytorch_model.bin and *.ckpt.index; name the checkpoint file instead",
                   dir.string());
  if (found.size() > 1) {
    std::vector<std::string> names;
    for (const auto& f : found) names.push_back(f.filename().string());
    throw DataError(fmt::format("{}: a folder with {} checkpoints ({}); name the one to use",
                                dir.string(), found.size(), fmt::join(names, ", ")));
  }
  return locate_checkpoint(found.front());
}

}  // namespace

const char* to_string(CheckpointFormat format) {
  switch (format) {
    case CheckpointFormat::kTensorFlow:
      return "tensorflow";
    case CheckpointFormat::kPyTorch:
      return "pytorch";
    case CheckpointFormat::kSafetensors:
      return "safetensors";
  }
  return "?";
}

CheckpointLocation locate_checkpoint(const fs::path& path) {
  if (fs::is_directory(path)) return locate_in_folder(path);
  if (!fs::exists(path)) {
    // Google names a TF checkpoint by its prefix, which is no file itself.
    const fs::path index = path.string() + ".index";
    BERTLAB_CHECK_AS(DataError, fs::is_regular_file(index),
                     "{}: no such file, and no TensorFlow checkpoint {} beside it", path.string(),
                     index.filename().string());
    return locate_checkpoint(index);
  }
  const auto format = format_of_file(path);
  BERTLAB_CHECK_AS(DataError, format.has_value(),
                   "{}: not a checkpoint bertlab reads: neither safetensors, a torch.save zip "
                   "(pytorch_model.bin) nor a TensorFlow checkpoint index",
                   path.string());
  CheckpointLocation location;
  location.format = *format;
  location.file = *format == CheckpointFormat::kTensorFlow ? tf_checkpoint_index_path(path) : path;
  return location;
}

Checkpoint read_checkpoint(const fs::path& path) {
  Checkpoint ckpt;
  ckpt.location = locate_checkpoint(path);
  switch (ckpt.location.format) {
    case CheckpointFormat::kTensorFlow:
      ckpt.tensors = read_tf_checkpoint(ckpt.location.file);
      break;
    case CheckpointFormat::kPyTorch:
      ckpt.tensors = read_torch_checkpoint(ckpt.location.file);
      break;
    case CheckpointFormat::kSafetensors:
      ckpt.tensors = read_safetensors(ckpt.location.file, &ckpt.metadata);
      break;
  }
  return ckpt;
}

}  // namespace bertlab
