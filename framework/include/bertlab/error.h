#pragma once
// Exceptions thrown by bertlab library code. Only main() turns them into messages and exit codes:
// ConfigError and PluginError exit 2, every other Error exits 1.

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace bertlab {

/// Base of every error bertlab throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A bad experiment file, `--set` argument or option value (exit code 2).
/// Holds every problem found, each already formatted as `FILE:LINE:COL: KEY: what is wrong`.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message) : Error(message), messages_{message} {}
  explicit ConfigError(std::vector<std::string> messages);
  /// One line per problem.
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::vector<std::string> messages_;
};

/// A plugin that cannot be loaded or registered (exit code 2).
class PluginError : public Error {
 public:
  using Error::Error;
};

/// Bad input data: a malformed TSV row, invalid UTF-8, a missing column (exit code 1).
class DataError : public Error {
 public:
  using Error::Error;
};

/// Communication between ranks failed: the rendezvous, a collective, a rank that stopped or
/// timed out, ranks that disagree (exit code 1). Messages start with "[comm] rank R of N". When
/// thread ranks fail together, the host reports a rank's own error before the CommErrors of the
/// ranks that then waited for it in vain.
class CommError : public Error {
 public:
  using Error::Error;
};

/// SIGINT or SIGTERM stopped a run after a step (and its checkpoint); main() exits 128 + signal.
class Interrupted : public Error {
 public:
  Interrupted(const std::string& message, int signal) : Error(message), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

/// `text` without the lines of a C++ stack trace that libtorch appends to its messages
/// ("Exception raised from ... (most recent call first):", "frame #N: ..."): what a person can
/// act on is the first part. Kept whole when debug_errors() is on.
std::string without_stack_trace(const std::string& text);

/// `e.what()` as without_stack_trace() leaves it: use it wherever a library's message is
/// wrapped into one of ours.
std::string error_text(const std::exception& e);

/// True when BERTLAB_DEBUG is set to anything but "" or "0" (`bertlab --verbose` sets it): error
/// messages keep libtorch's C++ stack traces.
bool debug_errors();

}  // namespace bertlab

/// Throws bertlab::Error with a fmt-formatted message when `cond` is false.
#define BERTLAB_CHECK(cond, ...)                                   \
  do {                                                             \
    if (!(cond)) throw ::bertlab::Error(fmt::format(__VA_ARGS__)); \
  } while (0)

/// Same, with a chosen exception type (e.g. bertlab::DataError).
#define BERTLAB_CHECK_AS(ErrorType, cond, ...)              \
  do {                                                      \
    if (!(cond)) throw ErrorType(fmt::format(__VA_ARGS__)); \
  } while (0)
