#pragma once
// CRC-32C (Castagnoli), as TensorFlow checkpoints and TFRecord files use it, with LevelDB's
// mask for checksums stored next to the data they cover.

#include <cstddef>
#include <cstdint>

namespace bertlab {

/// The CRC-32C of `data[0, n)` continuing from `crc` (0 to start).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);

/// The CRC-32C of `data[0, n)`.
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }

/// The masked form stored in files: rotated right by 15 bits plus a constant, so the CRC of a
/// string that contains its own CRC is not degenerate.
uint32_t crc32c_mask(uint32_t crc);
/// Inverse of crc32c_mask().
uint32_t crc32c_unmask(uint32_t masked);

}  // namespace bertlab
