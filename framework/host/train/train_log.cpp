// Logging windows, metrics.jsonl lines and the progress line of a rank's training.

#include "train/train_log.h"

#include <bertlab/io/atomic_file.h>
#include <bertlab/log.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

namespace bertlab {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

TrainLog::TrainLog(Setup setup, const TrainState* resume, int64_t first_step)
    : setup_(std::move(setup)),
      first_step_(first_step),
      progress_(setup_.variant, setup_.num_train_steps) {
  if (resume != nullptr) {
    // A resumed run's metrics.jsonl continues the checkpoint's.
    lines_ = resume->metrics_lines;
    window_loss_ = resume->window_loss;
    window_steps_ = resume->window_steps;
    window_all_ = resume->window_all;
    dense_bytes_ = resume->window_dense_bytes;
    sparse_bytes_ = resume->window_sparse_bytes;
    skipped_steps_ = resume->skipped_steps;
    final_loss_ = resume->final_loss;
  }
  if (setup_.write) {
    out_ = std::make_unique<AtomicFile>(setup_.dir / "metrics.jsonl", std::filesystem::path(),
                                        /*keep_partial=*/true);
    out_->write(lines_);
  }
  window_start_ = Clock::now();
  train_start_ = Clock::now();
}

TrainLog::~TrainLog() = default;

double TrainLog::seconds() const { return seconds_since(train_start_); }

void TrainLog::record(int64_t step, const StepResult& r, double data_s) {
  data_s_ += data_s;
  compute_s_ += r.compute_s;
  comm_s_ += r.comm_s;
  optimizer_s_ += r.optimizer_s;
  dense_bytes_ += r.dense_bytes;
  sparse_bytes_ += r.sparse_bytes;
  overlap_buckets_ += r.overlap.buckets;
  overlap_buckets_in_backward_ += r.overlap.buckets_in_backward;
  if (r.skipped) ++skipped_steps_;
  if (setup_.leader && !r.skip_reason.empty()) {
    log_warning("train", "step {}: {}; update skipped ({} so far)", step + 1, r.skip_reason,
                skipped_steps_);
  }
  ++window_all_;
  ++window_here_;
  if (r.finite) {
    window_loss_ += r.loss;
    ++window_steps_;
  }
}

void TrainLog::write_step(int64_t step, const StepResult& r, double loss_scale, bool last) {
  const int64_t done = step + 1;
  const double batch = static_cast<double>(setup_.batch_size);
  progress_.update(done, r.loss, static_cast<double>(done - first_step_) * batch / seconds());
  if (done % setup_.log_every != 0 && done != setup_.num_train_steps && !last) return;
  const double window_s = seconds_since(window_start_);
  nlohmann::ordered_json line;
  line["step"] = done;
  if (setup_.num_examples > 0) {
    line["epoch"] = static_cast<double>(done) * batch / static_cast<double>(setup_.num_examples);
  }
  // null when every step of the window was skipped.
  line["loss"] = window_steps_ > 0 ? window_loss_ / static_cast<double>(window_steps_)
                                   : std::numeric_limits<double>::quiet_NaN();
  line["learning_rate"] = r.stats.learning_rate;
  line["grad_norm"] = r.stats.grad_norm;
  line["examples_per_second"] =
      static_cast<double>(window_here_) * batch / std::max(window_s, 1e-9);
  line["elapsed_s"] = seconds_since(setup_.run_start);
  const double n = static_cast<double>(std::max<int64_t>(window_all_, 1));
  line["data_s"] = data_s_ / n;
  line["compute_s"] = compute_s_ / n;
  line["comm_s"] = comm_s_ / n;
  line["optimizer_s"] = optimizer_s_ / n;
  line["comm_dense_bytes"] = static_cast<double>(dense_bytes_) / n;
  line["skipped_steps"] = skipped_steps_;
  if (loss_scale > 0) line["loss_scale"] = loss_scale;
  line["comm_sparse_bytes"] = static_cast<double>(sparse_bytes_) / n;
  line["optimizer_state_bytes"] = setup_.optimizer_state_bytes;
  for (const auto& [name, value] : r.strategy_metrics) line["strategy." + name] = value;
  if (setup_.overlap) {
    // Per step: the buckets all-reduced, and those started while backward still ran.
    line["overlap_buckets"] = static_cast<double>(overlap_buckets_) / n;
    line["overlap_buckets_in_backward"] = static_cast<double>(overlap_buckets_in_backward_) / n;
  }
  const std::string text = line.dump() + "\n";
  out_->write(text);
  out_->flush();
  lines_ += text;
  if (window_steps_ > 0) final_loss_ = window_loss_ / static_cast<double>(window_steps_);
  progress_.log_line(done, final_loss_, r.stats.learning_rate,
                     line["examples_per_second"].get<double>(),
                     format_eta(seconds() / static_cast<double>(done - first_step_) *
                                static_cast<double>(setup_.num_train_steps - done)));
  window_loss_ = 0.0;
  window_steps_ = 0;
  window_all_ = 0;
  window_here_ = 0;
  data_s_ = compute_s_ = comm_s_ = optimizer_s_ = 0;
  dense_bytes_ = sparse_bytes_ = 0;
  overlap_buckets_ = overlap_buckets_in_backward_ = 0;
  window_start_ = Clock::now();
}

void TrainLog::write_eval(int64_t step, const Metrics& metrics) {
  nlohmann::ordered_json line;
  line["step"] = step + 1;
  line["elapsed_s"] = seconds_since(setup_.run_start);
  std::string summary;
  for (const auto& [name, value] : metrics) {
    line[name] = value;
    summary += fmt::format(" {} {:.4f}", name, value);
  }
  const std::string text = line.dump() + "\n";
  out_->write(text);
  out_->flush();
  lines_ += text;
  log_info("eval", "{} step {}:{}", setup_.variant, step + 1, summary);
}

void TrainLog::finish() {
  if (!setup_.write) return;
  progress_.finish();
  out_->commit();
}

void TrainLog::abandon() { out_.reset(); }

void TrainLog::fill(TrainState& state) const {
  state.window_loss = window_loss_;
  state.window_steps = window_steps_;
  state.window_all = window_all_;
  state.window_dense_bytes = dense_bytes_;
  state.window_sparse_bytes = sparse_bytes_;
  state.skipped_steps = skipped_steps_;
  state.final_loss = final_loss_;
  state.metrics_lines = lines_;
}

}  // namespace bertlab
