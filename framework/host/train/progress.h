#pragma once
// Training progress on stderr: one self-updating line on a terminal (step/total, loss,
// examples/s, ETA), plain periodic lines otherwise (logs, CI).

#include <chrono>
#include <cstdint>
#include <string>

namespace bertlab {

class Progress {
 public:
  Progress(std::string variant, int64_t total_steps);
  /// After every step: redraws the terminal line (at most every 0.2 s).
  void update(int64_t step, double loss, double examples_per_second);
  /// At every logging step: a plain line when stderr is not a terminal.
  void log_line(int64_t step, double loss, double learning_rate, double examples_per_second,
                const std::string& eta);
  /// Ends the terminal line.
  void finish();

 private:
  std::string variant_;
  int64_t total_;
  bool tty_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace bertlab
