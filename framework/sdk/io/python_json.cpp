// Python's json.dumps and repr(float), for byte-identical output files.

#include <bertlab/error.h>
#include <bertlab/io/python_json.h>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <system_error>

namespace bertlab {

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest round-trip digits (as Python's repr, David Gay's algorithm) in the form
  // "-d.ddde+XX"; then laid out as Python's float_repr_style "short".
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  const size_t e_pos = sci.find('e');
  std::string_view mantissa = sci.substr(0, e_pos);
  const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  std::string out;
  if (!mantissa.empty() && mantissa.front() == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (const char c : mantissa) {
    if (c != '.') digits += c;
  }
  // value = 0.digits × 10^decpt, as Python's format_float_short counts it.
  const int decpt = exponent + 1;
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (n > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    const int e = decpt - 1;
    out += e < 0 ? "e-" : "e+";
    const int magnitude = std::abs(e);
    if (magnitude < 10) out += '0';
    out += std::to_string(magnitude);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= n) {
    out += digits;
    out.append(static_cast<size_t>(decpt - n), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out += '.';
    out.append(digits, static_cast<size_t>(decpt), std::string::npos);
  }
  return out;
}

namespace {

void dump(const nlohmann::ordered_json& value, int indent, int level, std::string& out) {
  const auto newline = [&](int depth) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
  };
  const char* item_separator = indent < 0 ? ", " : ",";
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::object: {
      if (value.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.items()) {
        if (!first) out += item_separator;
        first = false;
        newline(level + 1);
        out += nlohmann::ordered_json(key).dump(-1, ' ', true);
        out += ": ";
        dump(member, indent, level + 1, out);
      }
      newline(level);
      out += '}';
      return;
    }
    case nlohmann::ordered_json::value_t::array: {
      if (value.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& element : value) {
        if (!first) out += item_separator;
        first = false;
        newline(level + 1);
        dump(element, indent, level + 1, out);
      }
      newline(level);
      out += ']';
      return;
    }
    case nlohmann::ordered_json::value_t::number_float:
      out += python_float_repr(value.get<double>());
      return;
    default:  // strings (escaped as ensure_ascii), integers, booleans, null
      out += value.dump(-1, ' ', true);
      return;
  }
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto escape_unit = [&](uint32_t unit) {
    const char escaped[6] = {'\\',
                             'u',
                             kHex[(unit >> 12) & 0xF],
                             kHex[(unit >> 8) & 0xF],
                             kHex[(unit >> 4) & 0xF],
                             kHex[unit & 0xF]};
    out.append(escaped, 6);
  };
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  out += '"';
  while (p < end) {
    // A run of printable ASCII other than `"` and `\` goes over as it is.
    const auto* run = p;
    while (p < end && *p >= 0x20 && *p < 0x7F && *p != '"' && *p != '\\') ++p;
    out.append(reinterpret_cast<const char*>(run), static_cast<size_t>(p - run));
    if (p == end) break;
    const unsigned char c = *p;
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          escape_unit(c);  // other control characters and DEL
      }
      ++p;
      continue;
    }
    // A multi-byte UTF-8 sequence: decoded and checked (shortest form, no surrogates, <= U+10FFFF).
    const int length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    uint32_t cp = length == 4 ? c & 0x07u : length == 3 ? c & 0x0Fu : c & 0x1Fu;
    bool valid = length > 0 && c < 0xF5 && end - p >= length;
    for (int k = 1; valid && k < length; ++k) {
      valid = (p[k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[k] & 0x3Fu);
    }
    static constexpr uint32_t kSmallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    valid = valid && cp >= kSmallest[length] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!valid) {
      throw Error(fmt::format("JSON output: invalid UTF-8 at byte {} of a string",
                              p - reinterpret_cast<const unsigned char*>(text.data())));
    }
    if (cp < 0x10000) {
      escape_unit(cp);
    } else {
      cp -= 0x10000;
      escape_unit(0xD800 + (cp >> 10));
      escape_unit(0xDC00 + (cp & 0x3FF));
    }
    p += length;
  }
  out += '"';
}

std::string python_json_dumps(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  dump(value, indent, 0, out);
  return out;
}

}  // namespace bertlab
