// Code points and Python whitespace over UTF-8.

#include <bertlab/text/python_text.h>

namespace bertlab {

char32_t next_code_point(std::string_view text, size_t& i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  int extra = 0;
  char32_t c = b0;
  if (b0 >= 0xF0) {
    extra = 3;
    c = b0 & 0x07;
  } else if (b0 >= 0xE0) {
    extra = 2;
    c = b0 & 0x0F;
  } else if (b0 >= 0xC0) {
    extra = 1;
    c = b0 & 0x1F;
  }
  ++i;
  for (int k = 0; k < extra && i < text.size(); ++k, ++i) {
    c = (c << 6) | (static_cast<unsigned char>(text[i]) & 0x3F);
  }
  return c;
}

size_t count_code_points(std::string_view text) {
  size_t n = 0;
  for (const char ch : text) {
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++n;
  }
  return n;
}

bool is_python_space(char32_t c) {
  // CPython's _PyUnicode_IsWhitespace: bidirectional WS/B/S or category Zs.
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::vector<std::string_view> python_split(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  size_t word_begin = std::string_view::npos;
  while (i < text.size()) {
    const size_t begin = i;
    const char32_t c = next_code_point(text, i);
    if (is_python_space(c)) {
      if (word_begin != std::string_view::npos) {
        out.push_back(text.substr(word_begin, begin - word_begin));
        word_begin = std::string_view::npos;
      }
    } else if (word_begin == std::string_view::npos) {
      word_begin = begin;
    }
  }
  if (word_begin != std::string_view::npos) out.push_back(text.substr(word_begin));
  return out;
}

std::string join_python_split(std::string_view text) {
  std::string out;
  for (const auto word : python_split(text)) {
    if (!out.empty()) out += ' ';
    out.append(word);
  }
  return out;
}

}  // namespace bertlab
