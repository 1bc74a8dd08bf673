#pragma once
// CRC-32C (Castagnoli), as TensorFlow checkpoints and TFRecord files use it, with LevelDB's
// mask for checksums stored next to the data they cover.

#include <cstddef>
#include <cstdint>

namespace bertlab {

/// The CRC-32C of `data[0, n)` continuing from `crc` (0 to start). Uses the CPU's CRC-32C
/// instruction where it has one (x86-64 with SSE 4.2, AArch64 with the CRC extension).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);

/// crc32c_extend() by slicing-by-8 tables, without the CPU's instruction (the fallback; tests
/// compare the two).
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n);

/// Whether crc32c_extend() uses the CPU's instruction on this machine.
bool crc32c_uses_cpu_instruction();

/// The CRC-32C of `data[0, n)`.
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }

/// The masked form stored in files: rotated right by 15 bits plus a constant, so the CRC of a
/// string that contains its own CRC is not degenerate.
uint32_t crc32c_mask(uint32_t crc);
/// Inverse of crc32c_mask().
uint32_t crc32c_unmask(uint32_t masked);

}  // namespace bertlab
