#include <bertlab/error.h>

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

}  // namespace bertlab
