// CRC-32C: the CPU's instruction where there is one (SSE 4.2's crc32 on x86-64, the CRC
// extension on AArch64), chosen once at run time; slicing-by-8 tables otherwise.

#include <bertlab/io/crc32c.h>

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define BERTLAB_CRC32C_X86 1
#elif defined(__aarch64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#include <arm_acle.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#define BERTLAB_CRC32C_ARM 1
#endif

namespace bertlab {

namespace {

/// The reflected Castagnoli polynomial (0x1EDC6F41 bit-reversed).
constexpr uint32_t kPolynomial = 0x82F63B78u;
/// LevelDB's (and TensorFlow's) mask delta, crc32c/crc32c.h's kMaskDelta.
constexpr uint32_t kMaskDelta = 0xa282ead8u;

using Tables = std::array<std::array<uint32_t, 256>, 8>;

/// Slicing-by-8 tables: kTables[0] is the classic bytewise table; kTables[k][b] is the CRC
/// of byte b followed by k zero bytes, so 8 input bytes are folded with 8 lookups.
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    t[0][b] = crc;
  }
  for (size_t k = 1; k < t.size(); ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t prev = t[k - 1][b];
      t[k][b] = (prev >> 8) ^ t[0][prev & 0xffu];
    }
  }
  return t;
}

constexpr Tables kTables = make_tables();

/// A little-endian 32-bit load from any alignment (compiles to one load on x86 and ARM).
inline uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

#if defined(BERTLAB_CRC32C_X86)

// Eight bytes per instruction; the instruction computes the same reflected CRC-32C as the tables
// (crc32 takes and returns the inverted register, as the tables' loop keeps it).
__attribute__((target("sse4.2"))) uint32_t crc32c_hardware(uint32_t crc, const uint8_t* p,
                                                           size_t n) {
  uint64_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word = 0;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

bool hardware_available() { return __builtin_cpu_supports("sse4.2") != 0; }

#elif defined(BERTLAB_CRC32C_ARM)

__attribute__((target("+crc"))) uint32_t crc32c_hardware(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word = 0;
    std::memcpy(&word, p, 8);
    c = __crc32cd(c, word);
  }
  for (; n > 0; ++p, --n) c = __crc32cb(c, *p);
  return ~c;
}

bool hardware_available() { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }

#else

uint32_t crc32c_hardware(uint32_t crc, const uint8_t* p, size_t n) {
  return crc32c_extend_portable(crc, p, n);
}

bool hardware_available() { return false; }

#endif

}  // namespace

bool crc32c_uses_cpu_instruction() {
  static const bool available = hardware_available();  // decided once, on first use
  return available;
}

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
  if (crc32c_uses_cpu_instruction())
    return crc32c_hardware(crc, static_cast<const uint8_t*>(data), n);
  return crc32c_extend_portable(crc, data, n);
}

uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    const uint32_t lo = load_le32(p) ^ c;
    const uint32_t hi = load_le32(p + 4);
    c = kTables[7][lo & 0xffu] ^ kTables[6][(lo >> 8) & 0xffu] ^ kTables[5][(lo >> 16) & 0xffu] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xffu] ^ kTables[2][(hi >> 8) & 0xffu] ^
        kTables[1][(hi >> 16) & 0xffu] ^ kTables[0][hi >> 24];
  }
  for (; n > 0; ++p, --n) c = kTables[0][(c ^ *p) & 0xffu] ^ (c >> 8);
  return ~c;
}

uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint32_t crc32c_unmask(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace bertlab
