#pragma once
// PyTorch checkpoints written by torch.save in the zip format (PyTorch >= 1.6), such as
// Hugging Face's pytorch_model.bin: a zip archive holding `<name>/data.pkl` (a pickle of the
// state dict) and `<name>/data/<key>` (the storages). The pickle is read by a restricted
// unpickler of our own: it builds only dicts, lists, tuples, strings, numbers and tensors, so a
// file can never run code.

#include <bertlab/io/safetensors.h>

#include <filesystem>

namespace bertlab {

/// Whether `file` starts as a zip archive does (a local file header, "PK\x03\x04").
bool is_zip_file(const std::filesystem::path& file);

/// Every tensor of the state dict in `path` (CPU, in the pickle's order). A nested dict's
/// entries are named `outer.inner`; leaves that are not tensors (an epoch number, ...) are
/// skipped. Throws DataError naming the file for: a file that is not a zip archive (a legacy
/// torch.save file says to re-save it with torch >= 1.6), a missing record, a corrupt or
/// truncated pickle, a tensor view that does not fit its storage, and a pickle that references any
/// global besides the tensor-rebuilding ones (collections.OrderedDict,
/// torch._utils._rebuild_tensor_v2, torch._utils._rebuild_tensor, torch._utils._rebuild_parameter,
/// torch.*Storage) — naming that global. Storages are read as little-endian (a `byteorder` record
/// saying otherwise is refused); their devices (cpu, cuda:0) are ignored.
NamedTensors read_torch_checkpoint(const std::filesystem::path& path);

}  // namespace bertlab
