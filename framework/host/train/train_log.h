#pragma once
// What a rank's training reports: the sums of each logging window, metrics.jsonl (written as
// metrics.jsonl.partial, a line every log_every_steps, put in place at the end) and the progress
// line; and the totals a checkpoint keeps so that a resumed run continues them.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <bertlab/task.h>

#include "train/progress.h"
#include "train/train_checkpoint.h"
#include "train/train_step.h"

namespace bertlab {

class AtomicFile;

class TrainLog {
 public:
  struct Setup {
    std::filesystem::path dir;  ///< the variant's folder
    std::string variant;
    int64_t num_train_steps = 0;
    int64_t num_examples = 0;  ///< 0: streamed (no epoch column)
    int64_t batch_size = 0;    ///< examples per step
    int64_t log_every = 1;
    std::chrono::steady_clock::time_point run_start;  ///< elapsed_s counts from here
    bool leader = false;                              ///< rank 0: logs warnings
    bool write = false;                               ///< rank 0 of a run that writes files
    bool overlap = false;  ///< the step overlaps all-reduce with backward: log its buckets
    int64_t optimizer_state_bytes = 0;  ///< on the rank that holds the most (zero1: a shard)
  };
  /// `resume`: the state of the checkpoint a resumed run continues; null for a new run.
  TrainLog(Setup setup, const TrainState* resume, int64_t first_step);
  ~TrainLog();
  TrainLog(const TrainLog&) = delete;
  TrainLog& operator=(const TrainLog&) = delete;

  /// Adds step `step`'s result (every rank); a skipped update is counted and, on rank 0, logged.
  void record(int64_t step, const StepResult& r, double data_s);
  /// Rank 0 of a writing run, after record(): the progress line, and a metrics.jsonl line when
  /// one is due or `last` (training ends after this step: stop_when). `loss_scale`: fp16's
  /// scale (0 when loss scaling is off).
  void write_step(int64_t step, const StepResult& r, double loss_scale, bool last = false);
  /// Rank 0 of a writing run: an evaluation during training (eval_every_steps), after step
  /// `step`'s write_step(), as a metrics.jsonl line of its own: step, elapsed_s, the metrics.
  void write_eval(int64_t step, const Metrics& metrics);
  /// The end of training: metrics.jsonl in place.
  void finish();
  /// A stop before the end: metrics.jsonl.partial stays, with the steps done.
  void abandon();
  /// The totals a checkpoint keeps (window, skipped steps, final loss, lines so far).
  void fill(TrainState& state) const;
  /// The mean loss of the last logged window.
  double final_loss() const { return final_loss_; }
  /// Seconds since training started in this process.
  double seconds() const;

 private:
  Setup setup_;
  int64_t first_step_;
  std::unique_ptr<AtomicFile> out_;
  std::string lines_;  ///< every line so far, for checkpoints
  Progress progress_;
  std::chrono::steady_clock::time_point train_start_;
  std::chrono::steady_clock::time_point window_start_;
  double window_loss_ = 0.0;
  int64_t window_steps_ = 0;  ///< steps of the logging window with a finite loss
  int64_t window_all_ = 0;    ///< all steps of the logging window (before a resume too)
  int64_t window_here_ = 0;   ///< the window's steps run in this process (for examples/s)
  int64_t skipped_steps_ = 0;
  double final_loss_ = 0.0;
  /// Per-step sums over the window: time by phase, this rank's collective payload.
  double data_s_ = 0, compute_s_ = 0, comm_s_ = 0, optimizer_s_ = 0;
  int64_t dense_bytes_ = 0, sparse_bytes_ = 0;
  int64_t overlap_buckets_ = 0, overlap_buckets_in_backward_ = 0;
};

}  // namespace bertlab
