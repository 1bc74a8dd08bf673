// The progress line on stderr: self-updating on a terminal, periodic lines otherwise.

#include "train/progress.h"

#include <bertlab/log.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace bertlab {

Progress::Progress(std::string variant, int64_t total_steps)
    : variant_(std::move(variant)),
      total_(total_steps),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progress::update(int64_t step, double loss, double examples_per_second) {
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (step != total_ && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = elapsed / static_cast<double>(step) * static_cast<double>(total_ - step);
  const auto eta_s = static_cast<int64_t>(std::isfinite(eta) ? eta + 0.5 : 0);
  std::string line =
      fmt::format("\r[train] {} step {}/{}  loss {:.4f}  {:.1f} ex/s  ETA {}:{:02}\x1b[K", variant_,
                  step, total_, loss, examples_per_second, eta_s / 60, eta_s % 60);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::log_line(int64_t step, double loss, double learning_rate, double examples_per_second,
                        const std::string& eta) {
  if (tty_) return;
  log_info("train", "{} step {}/{} loss {:.4f} lr {:.3g} {:.1f} ex/s ETA {}", variant_, step,
           total_, loss, learning_rate, examples_per_second, eta);
}

void Progress::finish() {
  if (tty_ && drawn_) {
    std::fputs("\n", stderr);
    std::fflush(stderr);
  }
  drawn_ = false;
}

}  // namespace bertlab
