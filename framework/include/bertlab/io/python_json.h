#pragma once
// JSON text exactly as Python's json.dumps writes it (what run_squad.py and the official
// evaluation scripts print), so that files and outputs compare byte for byte.

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace bertlab {

/// Python's repr(float): the shortest digits that round-trip, in fixed notation for decimal
/// exponents -4..15 ("0.0001", "86.2", "3.0") and scientific otherwise ("1e-05", "1.5e+16");
/// "NaN", "Infinity" and "-Infinity" as json.dumps writes them.
std::string python_float_repr(double value);

/// json.dumps(value, indent=indent) with Python's defaults (ensure_ascii, keys in order):
/// indent < 0 writes one line with ", " and ": " separators; indent >= 0 puts each member on
/// its own line, indented by `indent` spaces per level.
std::string python_json_dumps(const nlohmann::ordered_json& value, int indent = -1);

// Direct writers for files of fixed record shapes (JSON Lines of features), byte for byte what
// python_json_dumps() writes for the same values, without building a document first.

/// Appends `text` (UTF-8) as json.dumps writes a str with ensure_ascii: in quotes, `"` and `\`
/// and control characters escaped, everything outside printable ASCII as \uXXXX (lower-case
/// hex, astral characters as surrogate pairs). Throws Error for invalid UTF-8.
void append_json_string(std::string& out, std::string_view text);

/// Appends the decimal digits of `value`.
inline void append_json_int(std::string& out, int64_t value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof(digits), value).ptr;
  out.append(digits, static_cast<size_t>(end - digits));
}

/// Appends `[v0, v1, ...]` (json.dumps of a list of ints), `count` values from `values`
/// followed by `zeros` zeros (padding), e.g. a feature padded to its fixed length.
template <typename Int>
void append_json_int_list(std::string& out, const Int* values, size_t count, size_t zeros = 0) {
  if (count + zeros == 0) {
    out += "[]";
    return;
  }
  // Written through a pointer into room made first: 20 digits, a sign and ", " at most a value.
  const size_t start = out.size();
  out.resize(start + 2 + 23 * count + 3 * zeros);
  char* p = out.data() + start;
  char* const limit = out.data() + out.size();
  *p++ = '[';
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) {
      *p++ = ',';
      *p++ = ' ';
    }
    p = std::to_chars(p, limit, static_cast<int64_t>(values[i])).ptr;
  }
  for (size_t i = 0; i < zeros; ++i) {
    if (count + i > 0) {
      *p++ = ',';
      *p++ = ' ';
    }
    *p++ = '0';
  }
  *p++ = ']';
  out.resize(static_cast<size_t>(p - out.data()));
}

}  // namespace bertlab
