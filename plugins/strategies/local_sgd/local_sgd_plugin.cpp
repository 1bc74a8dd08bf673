// The `local_sgd` strategy: post-local SGD (Lin et al. 2020, "Don't Use Large Mini-Batches, Use
// Local SGD"; PyTorch's PostLocalSGDOptimizer with PeriodicModelAverager as the behavioural
// reference). Before `start_step` every gradient is averaged exactly, as `mirrored` does; from it
// on each replica applies its own gradient and the replicas average their parameters every
// `period` steps. Contract: exact_until(start_step) + replicas_equal_after_sync.

#include <ATen/ATen.h>
#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>
#include <c10/core/GradMode.h>

#include <string>
#include <vector>

namespace bertlab::local_sgd {

namespace {

struct LocalSgdOptions {
  int64_t start_step = 0;  ///< steps 0 .. start_step−1 average gradients exactly
  int64_t period = 1;      ///< from start_step on, parameters averaged after every period-th step
  double bucket_mb = 25.0;
  /// Emulation: each rank adds the gathered parameters starting from its own, so the ranks'
  /// sums round differently and the replicas leave a synchronisation unequal.
  bool own_rank_first = false;
};

LocalSgdOptions read_options(const ConfigView& view) {
  LocalSgdOptions o;
  o.start_step = view.get_int("start_step");
  o.period = view.get_int("period");
  o.bucket_mb = view.get_float("bucket_mb");
  o.own_rank_first = view.get_string("emulate") == "own_rank_first";
  return o;
}

class LocalSgdStrategy final : public Strategy {
 public:
  explicit LocalSgdStrategy(LocalSgdOptions options) : options_(options) {}

  void begin_step(int64_t step) override { step_ = step; }

  void reduce_gradients(GradientSet& grads, Communicator& comm) override {
    if (step_ >= options_.start_step) return;  // local steps: each replica's own gradient
    grads.densify();
    all_reduce_mean_dense(grads, comm, options_.bucket_mb);
  }

  bool after_update(const std::vector<NamedTensor>& parameters, Communicator& comm,
                    int64_t step) override {
    if (step < options_.start_step) return true;
    if ((step - options_.start_step + 1) % options_.period != 0) return false;
    if (comm.world_size() > 1) average_parameters(parameters, comm);
    return true;
  }

 private:
  /// Every parameter replaced by the mean over the ranks, in buckets of bucket_mb MiB.
  void average_parameters(const std::vector<NamedTensor>& parameters, Communicator& comm) const {
    at::NoGradGuard no_grad;
    GradientSet set;
    for (const auto& p : parameters) {
      GradientEntry e;
      e.name = p.name;
      e.dense = p.tensor.detach().clone();
      e.shape = p.tensor.sizes().vec();
      set.add(std::move(e));
    }
    if (options_.own_rank_first) {
      average_own_rank_first(set, comm);
    } else {
      comm.set_traffic(Traffic::kDense);
      all_reduce_mean_dense(set, comm, options_.bucket_mb);
      comm.set_traffic(Traffic::kOther);
    }
    for (size_t i = 0; i < parameters.size(); ++i) {
      parameters[i].tensor.detach().copy_(set.entries()[i].dense);
    }
  }

  /// The emulation: gathered, then added from this rank's copy on (rank r: p_r + p_r+1 + ...).
  static void average_own_rank_first(GradientSet& set, Communicator& comm) {
    const int n = comm.world_size();
    for (auto& e : set.entries()) {
      const auto all = comm.all_gather(e.dense.contiguous());
      at::Tensor sum = all[static_cast<size_t>(comm.rank())].clone();
      for (int k = 1; k < n; ++k) sum.add_(all[static_cast<size_t>((comm.rank() + k) % n)]);
      e.dense = sum.div_(static_cast<double>(n));
    }
  }

  LocalSgdOptions options_;
  int64_t step_ = 0;
};

StrategyContract contract(const ConfigView& view, int /*replicas*/) {
  StrategyContract c;
  c.kind = ContractKind::kExactUntil;
  c.until_step = view.get_int("start_step");
  c.derivation =
      "before start_step the gradients are averaged as mirrored's (exact); after it each replica "
      "takes its own steps, so the update is not one device's; every period steps the "
      "parameters are averaged by one all-reduce, whose result is the same on every rank";
  c.invariants = {Invariant::kReplicasEqualAfterSync};
  return c;
}

void register_components(Registry& registry) {
  registry.add_strategy(
      ComponentSpec{
          "local_sgd",
          "post-local SGD: gradients averaged until start_step, then local steps and the "
          "parameters averaged every period steps",
          {int_option("start_step", 0,
                      "steps (0-based) before this one average gradients exactly, as mirrored")
               .at_least(0),
           int_option("period", 4,
                      "after start_step, average the parameters every this many "
                      "steps")
               .at_least(1),
           float_option("bucket_mb", 25.0, "MiB per all-reduce bucket").above(0),
           string_option("emulate", "none",
                         "reproduce a broken averaging: own_rank_first (each rank adds the "
                         "gathered parameters starting from its own; the replicas differ in the "
                         "last bits after a synchronisation)")
               .one_of({"none", "own_rank_first"})},
          contract},
      [](const ConfigView& view) {
        return std::make_unique<LocalSgdStrategy>(read_options(view));
      });
}

}  // namespace

}  // namespace bertlab::local_sgd

BERTLAB_PLUGIN("local_sgd", "0.1.0", bertlab::local_sgd::register_components)
