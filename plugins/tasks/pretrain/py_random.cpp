// CPython's Mersenne Twister (Modules/_randommodule.c) and the Lib/random.py methods on it.

#include "py_random.h"

#include <bertlab/error.h>

namespace bertlab::pretrain {

namespace {
constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpperMask = 0x80000000U;
constexpr uint32_t kLowerMask = 0x7fffffffU;
}  // namespace

PyRandom::PyRandom(uint64_t seed) {
  // random_seed(): the int's absolute value as 32-bit words, least significant first; 0 is [0].
  std::vector<uint32_t> key;
  do {
    key.push_back(static_cast<uint32_t>(seed & 0xffffffffU));
    seed >>= 32;
  } while (seed != 0);
  init_by_array(key);
}

void PyRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i) {
    mt_[i] = 1812433253U * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  mti_ = kN;
}

void PyRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218U);
  int i = 1;
  size_t j = 0;
  const auto key_length = static_cast<int>(key.size());
  for (int k = kN > key_length ? kN : key_length; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] +
             static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] =
        (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000U;  // MSB is 1, assuring a non-zero initial array
}

void PyRandom::refill() {
  int kk = 0;
  for (; kk < kN - kM; ++kk) {
    const uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
    mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
  }
  for (; kk < kN - 1; ++kk) {
    const uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
    mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
  }
  const uint32_t y = (mt_[kN - 1] & kUpperMask) | (mt_[0] & kLowerMask);
  mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
  mti_ = 0;
}

double PyRandom::random() {
  const uint32_t a = next_uint32() >> 5;
  const uint32_t b = next_uint32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

uint64_t PyRandom::getrandbits(int k) {
  BERTLAB_CHECK(k >= 1 && k <= 64, "getrandbits({}): k must be in [1, 64]", k);
  if (k <= 32) return next_uint32() >> (32 - k);
  // Words least significant first; the last one keeps its top (k - 32) bits.
  const uint64_t low = next_uint32();
  const uint64_t high = next_uint32() >> (64 - k);
  return low | (high << 32);
}

uint64_t PyRandom::randbelow(uint64_t n) {
  BERTLAB_CHECK(n >= 1, "randbelow({}): n must be >= 1", n);
  const int k = 64 - __builtin_clzll(n);  // n.bit_length()
  if (k <= 32) {                          // getrandbits(k) of one word, as below without the check
    uint64_t r = next_uint32() >> (32 - k);
    while (r >= n) r = next_uint32() >> (32 - k);
    return r;
  }
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

int64_t PyRandom::randrange(int64_t start, int64_t stop) {
  BERTLAB_CHECK(stop > start, "randrange({}, {}): empty range", start, stop);
  return start + static_cast<int64_t>(randbelow(static_cast<uint64_t>(stop - start)));
}

}  // namespace bertlab::pretrain
