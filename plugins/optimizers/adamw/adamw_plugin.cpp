// The adamw plugin's entry point.

#include "adamw.h"

#include <bertlab/plugin.h>

#include <memory>

namespace {

void register_components(bertlab::Registry& registry) {
  using bertlab::adamw::AdamW;
  using bertlab::adamw::AdamWOptions;
  registry.add_optimizer(
      bertlab::ComponentSpec{"adamw",
                             "PyTorch's AdamW: Adam with bias correction, decoupled weight "
                             "decay, optional AMSGrad",
                             AdamWOptions::declarations()},
      [](const bertlab::ConfigView& view) -> std::unique_ptr<bertlab::Optimizer> {
        return std::make_unique<AdamW>(AdamWOptions::from_config(view));
      });
}

}  // namespace

BERTLAB_PLUGIN("adamw", "0.1.0", register_components)
