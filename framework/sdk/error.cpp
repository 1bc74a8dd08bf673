#include <bertlab/error.h>

#include <cstdlib>
#include <sstream>
#include <string_view>

namespace bertlab {

namespace {
std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}
}  // namespace

ConfigError::ConfigError(std::vector<std::string> messages)
    : Error(join_lines(messages)), messages_(std::move(messages)) {}

bool debug_errors() {
  const char* v = std::getenv("BERTLAB_DEBUG");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

std::string without_stack_trace(const std::string& text) {
  if (debug_errors()) return text;
  // c10::Error (libtorch 1.13 and 2.x): the message, then "Exception raised from F at FILE:LINE
  // (most recent call first):" and one "frame #N: ..." line per frame.
  std::istringstream lines(text);
  std::vector<std::string> kept;
  for (std::string line; std::getline(lines, line);) {
    const auto start = line.find_first_not_of(' ');
    const std::string_view body =
        start == std::string::npos ? std::string_view() : std::string_view(line).substr(start);
    if (body.rfind("Exception raised from ", 0) == 0 || body.rfind("frame #", 0) == 0) continue;
    kept.push_back(line);
  }
  while (!kept.empty() && kept.back().find_first_not_of(" \t") == std::string::npos) {
    kept.pop_back();
  }
  return join_lines(kept);
}

std::string error_text(const std::exception& e) { return without_stack_trace(e.what()); }

}  // namespace bertlab
