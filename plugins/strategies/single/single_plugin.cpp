// The `single` strategy: one replica on one device, the reference every other strategy is
// compared against. Its gradient is already the gradient of the mean loss over the whole
// global batch, so there is nothing to combine.

#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>

namespace bertlab::single {

namespace {

class SingleStrategy final : public Strategy {
 public:
  void reduce_gradients(GradientSet& /*grads*/, Communicator& comm) override {
    BERTLAB_CHECK(comm.world_size() == 1,
                  "strategy 'single' runs one replica, but the world has {} ranks; use "
                  "replicas = 1 or a multi-replica strategy such as 'mirrored'",
                  comm.world_size());
  }
};

void register_components(Registry& registry) {
  registry.add_strategy(
      ComponentSpec{"single",
                    "one replica on one device: the reference for gradient averaging",
                    {},
                    [](const ConfigView&, int) {
                      StrategyContract c;
                      c.derivation = "the gradient of the mean loss over the whole global batch";
                      return c;
                    }},
      [](const ConfigView&) { return std::make_unique<SingleStrategy>(); });
}

}  // namespace

}  // namespace bertlab::single

BERTLAB_PLUGIN("single", "0.1.0", bertlab::single::register_components)
