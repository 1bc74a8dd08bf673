#pragma once
// `bertlab bench comm`: all-reduce and all-gather bandwidth of the Gloo communicator with
// thread ranks on this machine.

namespace bertlab {

struct CommBenchOptions {
  int world = 2;       ///< ranks (threads)
  double mb = 64.0;    ///< MiB per rank per collective
  int iterations = 5;  ///< timed repetitions after one warm-up
};

/// Prints one JSON line: median seconds and bandwidths of each collective. Returns 0.
int bench_comm(const CommBenchOptions& options);

}  // namespace bertlab
