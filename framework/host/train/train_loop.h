#pragma once
// The training loop of a variant's ranks: each rank takes batches from its source, takes the
// step, checks that the replicas agree, logs, stops on a signal and writes checkpoints; the
// ranks are threads of this process (a replica group) or this process in a launched run.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "config/experiment.h"
#include "runtime/process_rank.h"
#include "train/run_options.h"
#include "train/runner.h"
#include "train/train_checkpoint.h"

namespace torch::nn {
class Module;
}

namespace bertlab {

class Task;

/// What every rank's training loop needs; shared read-only by the rank threads.
struct TrainLoop {
  const ResolvedVariant* variant = nullptr;
  const RunOptions* options = nullptr;
  const Task* task = nullptr;
  c10::Device device = c10::Device(c10::kCPU);
  int64_t batch_size = 0;  ///< examples per optimizer step (all micro-batches)
  int64_t num_train_steps = 0;
  int64_t stop_after = 0;     ///< steps to run (<= num_train_steps; gradcheck runs fewer)
  std::filesystem::path dir;  ///< the variant's folder
  std::chrono::steady_clock::time_point start;
  bool write_files = true;  ///< rank 0 writes metrics.jsonl and checkpoints
  /// Checkpoints are due ([train] save_checkpoints_steps, signals): the same on every rank and
  /// process, which all contribute their state (rank_state.h); false for gradcheck.
  bool checkpoints = true;
  const RunHooks* hooks = nullptr;
  const TrainCheckpoint* resume = nullptr;  ///< continue from this checkpoint's state
};

struct TrainOutcome {
  int64_t steps = 0;
  double train_seconds = 0.0;
  double final_loss = 0.0;
};

/// Trains `models` (one per replica) as thread ranks of this process; rank 0's outcome.
TrainOutcome train_replicas(const TrainLoop& loop,
                            const std::vector<std::shared_ptr<torch::nn::Module>>& models);

/// Trains `model` as `process`'s rank of a launched run; the group is named `group_name`.
TrainOutcome train_process_rank(const TrainLoop& loop, torch::nn::Module& model,
                                const ProcessRank& process, const std::string& group_name);

}  // namespace bertlab
