// The adam_weight_decay plugin's entry point: registers Google BERT's optimizer.

#include "adam_weight_decay.h"

#include <bertlab/plugin.h>

#include <memory>

namespace {

void register_components(bertlab::Registry& registry) {
  using bertlab::adam_weight_decay::AdamWeightDecay;
  using bertlab::adam_weight_decay::AdamWeightDecayOptions;
  registry.add_optimizer(
      bertlab::ComponentSpec{"adam_weight_decay",
                             "Google BERT's AdamWeightDecay: Adam without bias correction, "
                             "decoupled weight decay, linear warmup and decay",
                             AdamWeightDecayOptions::declarations()},
      [](const bertlab::ConfigView& view) -> std::unique_ptr<bertlab::Optimizer> {
        return std::make_unique<AdamWeightDecay>(AdamWeightDecayOptions::from_config(view));
      });
}

}  // namespace

BERTLAB_PLUGIN("adam_weight_decay", "0.1.0", register_components)
