// Registers a strategy named like the in-tree `single`: the host must name both files.
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>

namespace {
void register_components(bertlab::Registry& registry) {
  registry.add_strategy(
      bertlab::ComponentSpec{"single", "an impostor", {}},
      [](const bertlab::ConfigView&) -> std::unique_ptr<bertlab::Strategy> { return nullptr; });
}
}  // namespace

BERTLAB_PLUGIN("duplicate", "0.0.1", register_components)
