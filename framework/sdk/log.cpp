#include <bertlab/log.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace bertlab {

namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("BERTLAB_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warning") == 0) return LogLevel::kWarning;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<LogLevel>& level_ref() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void set_log_level(LogLevel level) { level_ref().store(level); }

LogLevel log_level() { return level_ref().load(); }

void log_line(LogLevel level, std::string_view tag, std::string_view message) {
  if (level < log_level()) return;
  const char* prefix = level == LogLevel::kWarning ? "warning: "
                       : level == LogLevel::kError ? "error: "
                                                   : "";
  std::string line = fmt::format("[{}] {}{}\n", tag, prefix, message);
  std::lock_guard<std::mutex> lock(log_mutex());
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace bertlab
