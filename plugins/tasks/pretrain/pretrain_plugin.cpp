// The pretrain plugin's entry point: registers its tools.

#include <bertlab/plugin.h>

#include "pretrain_tools.h"

namespace {

void register_components(bertlab::Registry& registry) {
  using namespace bertlab::pretrain;
  registry.add_tool("pretrain", "create-data",
                    "create_pretraining_data.py: masked-LM/NSP instances as JSON Lines or TFRecord",
                    create_data_tool);
  registry.add_tool("bench", "create-data", "pretraining data creation speed (instances/s)",
                    bench_create_data_tool);
}

}  // namespace

BERTLAB_PLUGIN("pretrain", "0.1.0", register_components)
