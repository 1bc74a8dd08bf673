// The lamb plugin's entry point.

#include "lamb.h"

#include <bertlab/plugin.h>

#include <memory>

namespace {

void register_components(bertlab::Registry& registry) {
  using bertlab::lamb::Lamb;
  using bertlab::lamb::LambOptions;
  registry.add_optimizer(
      bertlab::ComponentSpec{"lamb",
                             "LAMB (You et al. 2019) as NVIDIA's BERT: bias-corrected Adam, "
                             "decoupled weight decay, per-parameter trust ratio |w|/|update|",
                             LambOptions::declarations()},
      [](const bertlab::ConfigView& view) -> std::unique_ptr<bertlab::Optimizer> {
        return std::make_unique<Lamb>(LambOptions::from_config(view));
      });
}

}  // namespace

BERTLAB_PLUGIN("lamb", "0.1.0", register_components)
