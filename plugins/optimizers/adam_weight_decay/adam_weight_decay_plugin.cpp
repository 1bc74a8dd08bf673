// The adam_weight_decay plugin's entry point: registers Google BERT's optimizer and LAMB.

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
  registry.add_optimizer(
      bertlab::ComponentSpec{"lamb",
                             "LAMB (You et al. 2019, NVIDIA's BERT form): bias-corrected Adam, "
                             "decoupled weight decay, per-layer trust ratio; warmup and decay "
                             "as adam_weight_decay",
                             AdamWeightDecayOptions::declarations()},
      [](const bertlab::ConfigView& view) -> std::unique_ptr<bertlab::Optimizer> {
        AdamWeightDecayOptions options = AdamWeightDecayOptions::from_config(view);
        options.lamb = true;
        return std::make_unique<AdamWeightDecay>(std::move(options));
      });
}

}  // namespace

BERTLAB_PLUGIN("adam_weight_decay", "0.1.0", register_components)
