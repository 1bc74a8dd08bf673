// A regression for the baseline tests: `mirrored` whose last gradient bucket is never
// all-reduced, so each rank keeps its own gradient of that parameter (as when a bucket's
// ready-count misses a parameter). It claims the exact contract all the same.
#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/grad.h>
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>

namespace {

class DroppedBucketStrategy final : public bertlab::Strategy {
 public:
  void reduce_gradients(bertlab::GradientSet& grads, bertlab::Communicator& comm) override {
    grads.densify();
    // Every parameter but the last (the last bucket, one parameter wide) is averaged.
    bertlab::GradientSet sent;
    const auto& all = grads.entries();
    for (size_t i = 0; i + 1 < all.size(); ++i) sent.add(all[i]);
    bertlab::all_reduce_mean_dense(sent, comm, /*bucket_mb=*/25.0);
    for (const auto& e : sent.entries()) *grads.find(e.name) = e;
  }
};

bertlab::StrategyContract exact(const bertlab::ConfigView&, int) {
  bertlab::StrategyContract c;
  c.kind = bertlab::ContractKind::kExact;
  c.derivation = "claims mirrored's contract; drops its last bucket";
  return c;
}

void register_components(bertlab::Registry& registry) {
  registry.add_strategy(
      bertlab::ComponentSpec{"test_dropped_bucket",
                             "test plugin: mirrored without its last bucket's all-reduce",
                             {},
                             exact},
      [](const bertlab::ConfigView&) { return std::make_unique<DroppedBucketStrategy>(); });
}

}  // namespace

BERTLAB_PLUGIN("dropped_bucket", "1.0.0", register_components)
