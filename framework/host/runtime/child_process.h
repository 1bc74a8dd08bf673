#pragma once
// Child processes whose merged stdout and stderr the parent reads line by line and prints with a
// prefix: the ranks of `bertlab launch` and the runs of `bertlab run --jobs`.

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace bertlab {

/// One started child.
struct ChildProcess {
  pid_t pid = -1;
  int fd = -1;          ///< read end of the child's merged stdout/stderr; -1 once reaped
  std::string pending;  ///< output not yet ending in a newline
  bool done = false;
  int exit_code = 0;  ///< its exit status, or 128 + the signal that killed it
  std::string how;    ///< "exited with 3", "was killed by SIGKILL (exit code 137)"
};

/// Starts `command` (argv[0] looked up on PATH) in its own process group with `env` added to
/// this process's environment; its stdout and stderr go to a pipe the returned child holds.
/// `what` names it in an error ("launch", "run --jobs").
ChildProcess start_child(const std::vector<std::string>& command,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         const std::string& what);

/// Reads what `child` wrote and prints its complete lines to stdout, each after `prefix`.
/// Returns false at the end of its output (the child is done: reap it).
bool forward_output(ChildProcess& child, const std::string& prefix);

/// Waits for the finished child's process and records how it ended.
void reap(ChildProcess& child);

/// The path of this executable (for children that are bertlab again).
std::string self_executable();

}  // namespace bertlab
