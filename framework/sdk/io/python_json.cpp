// Python's json.dumps and repr(float), for byte-identical output files.

#include <bertlab/io/python_json.h>

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

std::string python_json_dumps(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  dump(value, indent, 0, out);
  return out;
}

}  // namespace bertlab
