// The sgd plugin's entry point.

#include "sgd.h"

#include <bertlab/plugin.h>

#include <memory>

namespace {

void register_components(bertlab::Registry& registry) {
  using bertlab::sgd::Sgd;
  using bertlab::sgd::SgdOptions;
  registry.add_optimizer(
      bertlab::ComponentSpec{"sgd",
                             "PyTorch's SGD: L2 weight decay, momentum with dampening, Nesterov",
                             SgdOptions::declarations()},
      [](const bertlab::ConfigView& view) -> std::unique_ptr<bertlab::Optimizer> {
        return std::make_unique<Sgd>(SgdOptions::from_config(view));
      });
}

}  // namespace

BERTLAB_PLUGIN("sgd", "0.1.0", register_components)
