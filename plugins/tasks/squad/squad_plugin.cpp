// The squad plugin's entry point: registers the "squad" task and its tools.

#include <bertlab/plugin.h>

#include <memory>

#include "squad_options.h"
#include "squad_task.h"
#include "squad_tools.h"

namespace {

void register_components(bertlab::Registry& registry) {
  using namespace bertlab::squad;
  registry.add_task(
      bertlab::ComponentSpec{"squad",
                             "SQuAD v1.1/v2.0 question answering, as Google's run_squad.py, "
                             "scored with the official metrics",
                             squad_option_decls()},
      [](const bertlab::ConfigView& view) -> std::unique_ptr<bertlab::Task> {
        return std::make_unique<SquadTask>(SquadOptions::from_config(view));
      });
  registry.add_tool("squad", "features",
                    "print run_squad.py's features of a SQuAD file as JSON Lines", features_tool);
  registry.add_tool("squad", "evaluate",
                    "score predictions as the official evaluate-v1.1.py / evaluate-v2.0.py",
                    evaluate_tool);
  registry.add_tool("squad", "train",
                    "run_squad.py's flags: run (or --write_experiment) the equivalent experiment",
                    train_tool);
  registry.add_tool("bench", "squad-features", "SQuAD feature creation speed (features/s)",
                    bench_features_tool);
}

}  // namespace

BERTLAB_PLUGIN("squad", "0.1.0", register_components)
