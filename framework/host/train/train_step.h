#pragma once
// One training step on one rank, as docs/architecture.md draws it: forward and backward per
// micro-batch, overlap, reduce, unscale, the non-finite policy, the update; and the check that
// the replicas still agree.

#include <bertlab/adversarial.h>
#include <bertlab/communicator.h>
#include <bertlab/optimizer.h>
#include <bertlab/strategy.h>
#include <bertlab/task.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/batch_source.h"
#include "train/contract_probe.h"
#include "train/overlap_reducer.h"
#include "train/precision.h"

namespace torch::nn {
class Module;
}

namespace bertlab {

class GradientSet;

/// What a rank's steps share: its model, components, communicator and the policies of the step.
struct StepContext {
  const Task* task = nullptr;
  torch::nn::Module* model = nullptr;
  Strategy* strategy = nullptr;
  Optimizer* optimizer = nullptr;
  Communicator* comm = nullptr;
  OverlapReducer* overlap = nullptr;  ///< null: gradients are reduced after backward
  /// [adversarial]: runs each micro-batch's passes (null: one forward and backward).
  Adversarial* adversarial = nullptr;
  int64_t hidden_size = 0;  ///< the model's, for the adversarial perturbation's shape
  LossScaler* scaler = nullptr;
  BatchSplit split;
  c10::Device device = c10::Device(c10::kCPU);
  c10::ScalarType autocast_dtype = c10::kFloat;
  uint64_t seed = 0;
  bool per_example_dropout = true;        ///< masks keyed by the example, not the replica
  bool global_loss_normalization = true;  ///< a token-weighted loss over the whole step's tokens
  bool skip_nonfinite = false;            ///< skip a non-finite step instead of stopping
  std::vector<NamedTensor> parameters;    ///< the model's, for Strategy::after_update
  ContractProbe* probe = nullptr;         ///< gradcheck: measures the strategy's contract
  /// Rank 0: the averaged gradients before the update (gradcheck); empty elsewhere.
  std::function<void(int64_t step, const GradientSet& grads)> on_averaged;
  /// Every rank: the strategy shards the optimizer and rank 0 wants whole averaged gradients,
  /// so every rank takes part in Strategy::complete_gradients.
  bool complete_gradients = false;
};

/// What a step did, on every rank alike.
struct StepResult {
  double loss = 0.0;  ///< the global batch's mean loss
  StepStats stats;    ///< learning rate, gradient norm before clipping
  bool finite = true;
  bool skipped = false;     ///< the update was skipped (fp16 overflow, or on_nonfinite = skip_step)
  std::string skip_reason;  ///< on_nonfinite = skip_step: what was not finite, for the log
  double compute_s = 0.0, comm_s = 0.0, optimizer_s = 0.0;
  int64_t dense_bytes = 0, sparse_bytes = 0;  ///< this rank's collective payload
  OverlapStats overlap;
  bool synced = true;         ///< the parameters are the same on every rank after the step
  ContractMeasures measures;  ///< with a ContractProbe: what it measured
  /// Strategy::step_metrics() of this rank after its reduce_gradients.
  std::vector<std::pair<std::string, double>> strategy_metrics;
};

/// Takes step `step` (0-based) on `micro_batches`, this rank's share of each micro-batch.
/// Throws Error naming the parameter when a non-finite gradient stops the run.
StepResult train_step(const StepContext& ctx, const std::vector<Batch>& micro_batches,
                      int64_t step);

/// Every replica applied the same averaged gradient with the same optimizer, so their
/// parameters must be bitwise equal. Compares per-parameter checksums (sum and sum of squares,
/// in double) with every other rank; a difference names the step, the parameter and the ranks.
void check_replicas_agree(torch::nn::Module& model, Communicator& comm, int64_t step);

}  // namespace bertlab
