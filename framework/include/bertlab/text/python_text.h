#pragma once
// Python's view of text, for matching run_squad.py and the evaluation scripts: code points and
// str.split()'s whitespace.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bertlab {

/// The code point of valid UTF-8 at byte `i` of `text`; advances `i` past it.
char32_t next_code_point(std::string_view text, size_t& i);

/// Number of code points of valid UTF-8 `text` (Python's len of the str).
size_t count_code_points(std::string_view text);

/// Python's str.isspace for one code point (what str.split() splits on).
bool is_python_space(char32_t c);

/// Python's text.split(): the runs of non-whitespace, as byte ranges of `text`.
std::vector<std::string_view> python_split(std::string_view text);

/// " ".join(text.split()).
std::string join_python_split(std::string_view text);

}  // namespace bertlab
