// The classifier plugin's entry point: registers the "classifier" task.

#include <bertlab/plugin.h>

#include <memory>

#include "classifier.h"
#include "options.h"

namespace {

void register_components(bertlab::Registry& registry) {
  registry.add_task(
      bertlab::ComponentSpec{
          "classifier",
          "sentence(-pair) classification and regression as run_classifier.py: the nine GLUE "
          "tasks, XNLI, TREC question classification, and generic tsv/jsonl files",
          bertlab::classifier::classifier_option_decls()},
      [](const bertlab::ConfigView& view) -> std::unique_ptr<bertlab::Task> {
        return std::make_unique<bertlab::classifier::ClassifierTask>(
            bertlab::classifier::ClassifierOptions::from_config(view));
      });
}

}  // namespace

BERTLAB_PLUGIN("classifier", "0.1.0", register_components)
