#pragma once
// `bertlab launch`: starts N local processes of one command as the ranks of a run, with
// torchrun's variables, and streams their output prefixed by rank.

#include <string>
#include <vector>

namespace bertlab {

struct LaunchOptions {
  int nproc = 2;                     ///< processes (ranks) to start
  int master_port = 0;               ///< 0: a free port on 127.0.0.1
  std::vector<std::string> command;  ///< program and arguments; "bertlab" means this executable
};

/// Runs the ranks to completion. Returns 0 when every rank exits 0; otherwise the exit code of
/// the first rank that failed, after stopping the others.
int launch_processes(const LaunchOptions& options);

}  // namespace bertlab
