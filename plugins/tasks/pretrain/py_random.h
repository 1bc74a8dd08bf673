#pragma once
// CPython 3's random.Random, bit for bit: the Mersenne Twister MT19937 seeded from an int as
// CPython's random_seed() does, and random(), getrandbits(), randrange(), randint() and
// shuffle() as Lib/random.py builds them. create_pretraining_data.py draws every choice from
// random.Random(seed), so reproducing its instances needs the same stream.

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace bertlab::pretrain {

class PyRandom {
 public:
  /// random.Random(seed) for a non-negative int seed (CPython uses |seed|).
  explicit PyRandom(uint64_t seed);

  /// random(): 53 random bits as a double in [0, 1) (genrand_res53).
  double random();
  /// getrandbits(k) for 1 <= k <= 64.
  uint64_t getrandbits(int k);
  /// _randbelow(n) for n >= 1: getrandbits(n.bit_length()) until below n.
  uint64_t randbelow(uint64_t n);
  /// randrange(start, stop): start + _randbelow(stop - start); stop > start.
  int64_t randrange(int64_t start, int64_t stop);
  /// randint(a, b) = randrange(a, b + 1).
  int64_t randint(int64_t a, int64_t b) { return randrange(a, b + 1); }
  /// shuffle(x): Fisher-Yates from the back, j = _randbelow(i + 1).
  template <typename T>
  void shuffle(std::vector<T>& x) {
    for (size_t i = x.size(); i-- > 1;) {
      const auto j = static_cast<size_t>(randbelow(static_cast<uint64_t>(i) + 1));
      std::swap(x[i], x[j]);
    }
  }

  /// The next 32-bit output of MT19937 (genrand_uint32).
  uint32_t next_uint32() {
    if (mti_ >= kN) refill();
    uint32_t y = mt_[mti_++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
  }

 private:
  /// The next kN words of the state (the generation step of genrand_uint32).
  void refill();
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);

  static constexpr int kN = 624;
  std::array<uint32_t, kN> mt_{};
  int mti_ = kN + 1;
};

}  // namespace bertlab::pretrain
