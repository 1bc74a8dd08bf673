#pragma once
// A distribution strategy: how the replicas' local gradients become one averaged gradient, and
// what it promises about that average (its contract, which `bertlab gradcheck` checks). The host
// runs one training loop per rank (threads in one process, or processes) and calls the strategy
// on every rank with that rank's communicator; see docs/architecture.md, "One training step", and
// docs/strategy-contracts.md.

#include <ATen/core/Tensor.h>
#include <bertlab/optimizer.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bertlab {

class Communicator;
class GradientSet;

/// What a strategy's averaged gradient is, compared with exact averaging.
enum class ContractKind {
  kExact,       ///< equals one device's gradient up to summation order
  kBounded,     ///< every step within atol + rtol·mean|g_i| of the exact mean of the same g_i
  kExactUntil,  ///< exact for the steps before until_step; no claim after
};

/// Properties a strategy can claim and gradcheck measures.
enum class Invariant {
  /// Each rank's local gradient + its residual before the step = what it sent + its new
  /// residual (Strategy::last_error_feedback), to 1e-6 relative.
  kErrorFeedbackConserves,
  /// Right after each synchronisation (Strategy::after_update returned true) the parameters are
  /// bitwise equal on every rank.
  kReplicasEqualAfterSync,
  /// Each rank holds 1/N of the optimizer state, ± one parameter's.
  kOptimizerStateSharded,
};

/// "exact", "bounded", "exact_until".
const char* to_string(ContractKind kind);
/// "error_feedback_conserves", "replicas_equal_after_sync", "optimizer_state_sharded".
const char* to_string(Invariant invariant);

struct StrategyContract {
  ContractKind kind = ContractKind::kExact;
  /// kBounded: element-wise |averaged − exact mean| <= atol + rtol·(1/N)·Σ_i |g_i|, where g_i are
  /// the ranks' local gradients of the same step and the exact mean is taken in float64.
  double rtol = 0.0;
  double atol = 0.0;
  int64_t until_step = 0;  ///< kExactUntil: steps 0 .. until_step−1 (0-based) are exact
  std::string derivation;  ///< where the bound comes from, one or two sentences
  std::vector<Invariant> invariants;

  bool claims(Invariant invariant) const;
  /// "exact", "bounded (rtol 9.78e-04, atol 5.96e-08)", "exact_until(step 3) +
  /// error_feedback_conserves".
  std::string summary() const;
};

/// One parameter's error feedback in the last reduce_gradients of a rank: the local gradient g,
/// the residual e carried in, what the rank contributed to the collective (the compressed
/// g + e, before averaging) and the residual kept for the next step. Conservation:
/// g + residual_before = sent + residual_after.
struct ErrorFeedbackRecord {
  std::string name;
  at::Tensor residual_before;  ///< dense, the parameter's shape (zeros on the first step)
  at::Tensor sent;
  at::Tensor residual_after;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Called on every rank before the step's forward pass; `step` is 0-based.
  virtual void begin_step(int64_t step) { (void)step; }
  /// Replaces `grads` (this rank's gradient of its own mean loss) with the average over all
  /// ranks, identical on every rank (or, for a strategy that averages parameters instead, the
  /// gradient this rank applies).
  virtual void reduce_gradients(GradientSet& grads, Communicator& comm) = 0;
  /// Called on every rank after the optimizer updated `parameters` (and after a skipped
  /// update). A strategy that synchronises parameters (local SGD) does it here. Returns whether
  /// the parameters are now the same on every rank (the host then checks that they are);
  /// gradient-averaging strategies keep them equal after every step.
  virtual bool after_update(const std::vector<NamedTensor>& parameters, Communicator& comm,
                            int64_t step) {
    (void)parameters;
    (void)comm;
    (void)step;
    return true;
  }
  /// > 0: the host may average dense gradients while backward runs, as DDP does: buckets of
  /// this many MiB, all-reduced (sum, /N) as soon as all their gradients exist; the entries
  /// it averaged arrive in reduce_gradients marked GradientEntry::averaged. 0 (the default):
  /// reduce_gradients gets every gradient as computed.
  virtual double overlap_bucket_mb() const { return 0.0; }

  /// The state this rank carries from step to step (residuals, warm-started matrices,
  /// counters), for a resumable checkpoint: CPU copies with names of the strategy's choosing.
  /// Ranks may hold different state; the host saves each rank's.
  virtual std::vector<std::pair<std::string, at::Tensor>> state_dict() const { return {}; }
  /// Restores what state_dict() returned on this rank. Throws Error naming a missing,
  /// unexpected or mis-shaped tensor.
  virtual void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state);

  /// A strategy with error feedback: what the last reduce_gradients kept and sent, per
  /// parameter it compressed (gradcheck measures error_feedback_conserves with it).
  virtual std::vector<ErrorFeedbackRecord> last_error_feedback() const { return {}; }

  /// A strategy that shards the optimizer state (ZeRO stage 1): which of `parameters` this rank
  /// updates, one flag per parameter, the same partition on every rank. The host then gives the
  /// optimizer only those; reduce_gradients leaves this rank only their averaged gradients
  /// (GradientSet::set_shard_of for the whole norm) and after_update gathers the parameters the
  /// other ranks updated. Empty (the default): every rank updates every parameter. Called once,
  /// before the first step.
  virtual std::vector<bool> optimizer_shard(const std::vector<NamedTensor>& parameters, int rank,
                                            int world_size) {
    (void)parameters;
    (void)rank;
    (void)world_size;
    return {};
  }
  /// For a sharding strategy: makes `grads`, a copy of this rank's shard of the averaged
  /// gradient as reduce_gradients left it, the whole averaged gradient (new entries; the
  /// shard's tensors are left alone). The host calls it on every rank before the update, only
  /// to compare whole gradients (gradcheck).
  virtual void complete_gradients(GradientSet& grads, Communicator& comm) {
    (void)grads;
    (void)comm;
  }
  /// Numbers about this rank's last reduce_gradients for metrics.jsonl: rank 0's appear in each
  /// line as "strategy.NAME" (the values of the line's last step), e.g. how sparse_allgather
  /// exchanged its sparse gradients.
  virtual std::vector<std::pair<std::string, double>> step_metrics() const { return {}; }
};

}  // namespace bertlab
