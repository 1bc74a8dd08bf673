#pragma once
// A double-array trie over byte strings, for WordPiece's greedy longest-match: one walk along
// the word finds the longest vocabulary token that is a prefix of it, where a hash index would
// probe once per candidate length.

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace bertlab {

/// Immutable map from byte strings to non-negative ids, stored as a double array (Aoe, 1989):
/// the child of node s on byte b is t = base[s] + b + 1 when check[t] == s.
class ByteTrie {
 public:
  /// A longest-prefix match: `length` bytes of the text, the key's id; length 0 when none.
  struct Match {
    size_t length = 0;
    int32_t id = -1;
  };

  ByteTrie() = default;

  /// Builds the trie of `keys` (string, id). A key given twice keeps the id given last; the
  /// empty key is ignored, since no prefix match may be empty.
  static ByteTrie build(const std::vector<std::pair<std::string_view, int32_t>>& keys);

  /// The longest key that is a prefix of `text` and ends at a UTF-8 character boundary of it
  /// (the next byte, if any, is not a continuation byte), as WordPiece matches whole
  /// characters.
  Match longest_prefix(std::string_view text) const {
    Match best;
    uint32_t node = 0;
    const size_t size = units_.size();
    for (size_t i = 0; i < text.size(); ++i) {
      const size_t next =
          static_cast<size_t>(units_[node].base & ~kTerminal) + static_cast<uint8_t>(text[i]) + 1;
      if (next >= size || units_[next].check != node) break;
      node = static_cast<uint32_t>(next);
      if ((units_[node].base & kTerminal) != 0 &&
          (i + 1 == text.size() || (static_cast<uint8_t>(text[i + 1]) & 0xC0) != 0x80)) {
        best = Match{i + 1, values_[node]};
      }
    }
    return best;
  }

  /// The id of exactly `key`, or -1.
  int32_t find(std::string_view key) const;

  /// Number of slots in the double array (nodes plus holes), for tests and sizing.
  size_t slots() const { return units_.size(); }

  /// One slot of the double array: 8 bytes, so that the walk's dependent loads stay in cache
  /// (the ids, read only where a key ends, are apart).
  struct Unit {
    uint32_t base = 0;            // offset of the node's children; kTerminal: a key ends here
    uint32_t check = UINT32_MAX;  // parent slot, UINT32_MAX when unused; the root is slot 0
  };
  /// The bit of Unit::base that marks the end of a key.
  static constexpr uint32_t kTerminal = uint32_t{1} << 31;

 private:
  std::vector<Unit> units_;      // [slot]
  std::vector<int32_t> values_;  // [slot] id of the key ending here, -1 when none
};

}  // namespace bertlab
