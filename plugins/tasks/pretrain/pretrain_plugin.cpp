// The pretrain plugin's entry point: registers the "pretrain" task and its tools.

#include <bertlab/plugin.h>

#include <memory>

#include "pretrain_task.h"
#include "pretrain_tools.h"

namespace {

void register_components(bertlab::Registry& registry) {
  using namespace bertlab::pretrain;
  registry.add_task(
      bertlab::ComponentSpec{"pretrain",
                             "masked LM + next sentence prediction, as Google's run_pretraining.py "
                             "(next_sentence = false: masked LM alone, as RoBERTa)",
                             pretrain_option_decls()},
      [](const bertlab::ConfigView& view) -> std::unique_ptr<bertlab::Task> {
        return std::make_unique<PretrainTask>(PretrainOptions::from_config(view));
      });
  registry.add_tool("pretrain", "create-data",
                    "create_pretraining_data.py: masked-LM/NSP instances as JSON Lines or TFRecord "
                    "(--next_sentence=false: masked LM only)",
                    create_data_tool);
  registry.add_tool("bench", "create-data", "pretraining data creation speed (instances/s)",
                    bench_create_data_tool);
}

}  // namespace

BERTLAB_PLUGIN("pretrain", "0.1.0", register_components)
