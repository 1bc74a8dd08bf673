#include <bertlab/text/byte_trie.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace bertlab {

namespace {

constexpr uint32_t kFree = ByteTrie::Unit{}.check;  // check of a slot no node holds

// Builds the double array from keys sorted bytewise and without duplicates: the keys below a
// node are a contiguous range of them, and its children are the distinct bytes at `depth`.
class Builder {
 public:
  Builder(const std::vector<std::string_view>& keys, const std::vector<int32_t>& ids,
          std::vector<ByteTrie::Unit>& units, std::vector<int32_t>& values)
      : keys_(keys), ids_(ids), units_(units), values_(values) {}

  void run() {
    grow(1);
    take(0, 0);  // the root: no transition leads to slot 0, since targets are base + b + 1
    place(0, 0, keys_.size(), 0);
  }

 private:
  void grow(size_t size) {
    if (size <= units_.size()) return;
    units_.resize(std::max(size, units_.size() * 2));
    values_.resize(units_.size(), -1);
  }

  bool is_free(size_t slot) const { return slot >= units_.size() || units_[slot].check == kFree; }

  void take(size_t slot, uint32_t parent) {
    units_[slot].check = parent;
    if (slot / 64 >= used_.size()) used_.resize(slot / 64 + 1, 0);
    used_[slot / 64] |= uint64_t{1} << (slot % 64);
  }

  // The first free slot at or after `slot`, 64 slots per step through the used-slot bits.
  size_t next_free(size_t slot) const {
    size_t word = slot / 64;
    if (word >= used_.size()) return slot;
    uint64_t free_bits = ~used_[word] & (~uint64_t{0} << (slot % 64));
    while (free_bits == 0) {
      if (++word == used_.size()) return word * 64;
      free_bits = ~used_[word];
    }
    return word * 64 + static_cast<size_t>(__builtin_ctzll(free_bits));
  }

  // Gives node `slot` the keys [lo, hi), which share their first `depth` bytes.
  void place(uint32_t slot, size_t lo, size_t hi, size_t depth) {
    if (lo < hi && keys_[lo].size() == depth) {
      units_[slot].base |= ByteTrie::kTerminal;
      values_[slot] = ids_[lo];
      ++lo;
    }
    if (lo == hi) return;
    // The children: each distinct byte at `depth` with its range of keys.
    struct Child {
      uint8_t byte;
      size_t lo, hi;
    };
    std::vector<Child> children;
    for (size_t i = lo; i < hi;) {
      const auto byte = static_cast<uint8_t>(keys_[i][depth]);
      size_t j = i + 1;
      while (j < hi && static_cast<uint8_t>(keys_[j][depth]) == byte) ++j;
      children.push_back(Child{byte, i, j});
      i = j;
    }
    // The smallest base that puts every child on a free slot: the first child's slot runs over
    // the free slots from the first one, so that the array stays dense.
    first_free_ = next_free(first_free_);
    const size_t lowest = children[0].byte + size_t{1};  // the first child's slot when base is 0
    size_t base = 0;
    for (size_t at = next_free(std::max(first_free_, lowest));; at = next_free(at + 1)) {
      base = at - lowest;
      const bool fits = std::all_of(children.begin() + 1, children.end(),
                                    [&](const Child& c) { return is_free(base + c.byte + 1); });
      if (fits) break;
    }
    grow(base + children.back().byte + 2);
    if (base >= ByteTrie::kTerminal) {
      throw std::length_error("ByteTrie: more than 2^31 slots; the key set is too large");
    }
    units_[slot].base |= static_cast<uint32_t>(base);
    for (const Child& c : children) take(base + c.byte + 1, slot);
    for (const Child& c : children) {
      place(static_cast<uint32_t>(base + c.byte + 1), c.lo, c.hi, depth + 1);
    }
  }

  const std::vector<std::string_view>& keys_;
  const std::vector<int32_t>& ids_;
  std::vector<ByteTrie::Unit>& units_;
  std::vector<int32_t>& values_;
  std::vector<uint64_t> used_;  // bit per slot: whether a node holds it
  size_t first_free_ = 1;
};

}  // namespace

ByteTrie ByteTrie::build(const std::vector<std::pair<std::string_view, int32_t>>& keys) {
  // Sort by key, stably, so that of equal keys the one given last comes last and wins.
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return keys[a].first < keys[b].first; });
  std::vector<std::string_view> sorted;
  std::vector<int32_t> ids;
  for (const size_t i : order) {
    if (keys[i].first.empty()) continue;
    if (!sorted.empty() && sorted.back() == keys[i].first) {
      ids.back() = keys[i].second;
    } else {
      sorted.push_back(keys[i].first);
      ids.push_back(keys[i].second);
    }
  }
  ByteTrie trie;
  Builder(sorted, ids, trie.units_, trie.values_).run();
  // Trim the unused tail the doubling left: a lookup past the end fails its bounds check.
  size_t used = trie.units_.size();
  while (used > 1 && trie.units_[used - 1].check == kFree) --used;
  trie.units_.resize(used);
  trie.units_.shrink_to_fit();
  trie.values_.resize(used);
  trie.values_.shrink_to_fit();
  return trie;
}

int32_t ByteTrie::find(std::string_view key) const {
  if (key.empty()) return -1;
  uint32_t node = 0;
  for (const char c : key) {
    const size_t next =
        static_cast<size_t>(units_[node].base & ~kTerminal) + static_cast<uint8_t>(c) + 1;
    if (next >= units_.size() || units_[next].check != node) return -1;
    node = static_cast<uint32_t>(next);
  }
  return values_[node];
}

}  // namespace bertlab
