#pragma once
// Tagged log lines on stderr: `[train] step 10/100 ...`. The tag names the subsystem
// (plugin, config, comm, train, eval, data, model).

#include <fmt/format.h>

#include <string_view>

namespace bertlab {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

/// Lines below this level are dropped. Default kInfo; BERTLAB_LOG_LEVEL=debug|info|warning|error.
void set_log_level(LogLevel level);
LogLevel log_level();

/// Writes one line `[tag] message` (thread-safe, whole lines).
void log_line(LogLevel level, std::string_view tag, std::string_view message);

template <typename... Args>
void log_info(std::string_view tag, fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kInfo)
    log_line(LogLevel::kInfo, tag, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
void log_warning(std::string_view tag, fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kWarning)
    log_line(LogLevel::kWarning, tag, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
void log_debug(std::string_view tag, fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kDebug)
    log_line(LogLevel::kDebug, tag, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace bertlab
