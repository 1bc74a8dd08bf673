#pragma once
// The safetensors format: 8-byte little-endian header length, a JSON header mapping each tensor
// name to {dtype, shape, data_offsets} (plus an optional "__metadata__" of strings), then the
// raw little-endian data, every byte belonging to exactly one tensor.

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace bertlab {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Writes `tensors` (any device; stored from CPU copies) atomically: a temporary file renamed
/// into place. Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor (CPU, in header order). The file is memory-mapped and validated before
/// any tensor is read: header length, JSON, dtypes, shapes, offsets inside the data, sizes
/// matching shapes, no overlaps and no holes. Throws DataError naming the file and what is
/// wrong.
NamedTensors read_safetensors(const std::filesystem::path& path,
                              std::map<std::string, std::string>* metadata = nullptr);

}  // namespace bertlab
