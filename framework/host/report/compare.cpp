// `bertlab compare`: VariantResults read back from run folders, then the same comparison files
// as `bertlab run` writes.

#include "report/compare.h"

#include <bertlab/error.h>
#include <bertlab/io/safetensors.h>
#include <bertlab/log.h>
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "report/comparison.h"
#include "report/report.h"
#include "report/run_outputs.h"

namespace bertlab {

namespace fs = std::filesystem;

VariantResult result_from_outputs(const VariantOutputs& o, const std::string& label) {
  VariantResult r;
  r.name = label;
  r.seed = o.summary.seed;
  r.dir = o.dir;
  r.steps = o.summary.steps;
  r.final_loss = o.summary.final_loss;
  r.eval_metrics = o.eval;
  r.floor = o.floor;
  r.examples_per_second = o.summary.examples_per_second;
  r.wall_time_s = o.summary.wall_time_s;
  // The weights serve the parameter difference from the reference, which the comparison of
  // several seeds does not show: a run of several seeds is read without them.
  const fs::path weights = o.dir / "model.safetensors";
  std::error_code ec;
  if (!o.summary.seed && fs::is_regular_file(weights, ec)) {
    for (auto& [name, tensor] : read_safetensors(weights)) r.final_parameters[name] = tensor;
  }
  return r;
}

int compare_runs(const CompareOptions& options, std::ostream& out) {
  BERTLAB_CHECK(!options.runs.empty(), "compare: name at least one run folder");
  // Every variant folder once, in the order given.
  std::vector<fs::path> dirs;
  std::set<fs::path> seen;
  for (const auto& run : options.runs) {
    for (const auto& d : variant_dirs(run)) {
      const fs::path canonical = fs::weakly_canonical(d);
      if (seen.insert(canonical).second) dirs.push_back(canonical);
    }
  }
  std::vector<VariantOutputs> outputs;
  outputs.reserve(dirs.size());
  for (const auto& d : dirs) outputs.push_back(read_variant_outputs(d));

  std::set<fs::path> parents;
  std::vector<std::string> experiments;
  std::vector<std::string> files;
  // A run of several seeds is VARIANT/seed-S: its variant folder is one further up.
  auto variant_dir = [](const VariantOutputs& o) {
    return o.summary.seed ? o.dir.parent_path() : o.dir;
  };
  for (const auto& o : outputs) {
    parents.insert(variant_dir(o).parent_path());
    if (std::find(experiments.begin(), experiments.end(), o.summary.experiment) ==
        experiments.end()) {
      experiments.push_back(o.summary.experiment);
      if (!o.summary.experiment_file.empty()) files.push_back(o.summary.experiment_file);
    }
  }
  const bool one_experiment = parents.size() == 1;
  if (!options.output && !one_experiment) {
    throw ConfigError(fmt::format(
        "compare: the {} variants come from {} experiment folders; name the folder for the "
        "comparison with --output DIR",
        outputs.size(), parents.size()));
  }
  const fs::path output_dir = options.output ? *options.output : *parents.begin();

  // Labels: the variant name, prefixed by its experiment's when several are compared.
  std::vector<std::string> labels;
  for (const auto& o : outputs) {
    const std::string variant = variant_dir(o).filename().string();
    const std::string experiment = variant_dir(o).parent_path().filename().string();
    labels.push_back(one_experiment ? variant : fmt::format("{}/{}", experiment, variant));
  }

  ResolvedExperiment experiment;
  experiment.name = fmt::format("{}", fmt::join(experiments, " + "));
  experiment.file = fmt::format("{}", fmt::join(files, ", "));
  experiment.output_dir = output_dir.parent_path();
  for (const auto& o : outputs) {
    if (o.summary.seed && std::find(experiment.seeds.begin(), experiment.seeds.end(),
                                    *o.summary.seed) == experiment.seeds.end()) {
      experiment.seeds.push_back(*o.summary.seed);
    }
  }
  if (!options.reference.empty()) {
    if (std::find(labels.begin(), labels.end(), options.reference) == labels.end()) {
      throw ConfigError(fmt::format("compare --reference {}: no such variant; the variants are {}",
                                    options.reference, fmt::join(labels, ", ")));
    }
    experiment.reference = options.reference;
  } else {
    experiment.reference = labels.front();
    if (one_experiment && std::find(labels.begin(), labels.end(),
                                    outputs.front().summary.reference) != labels.end()) {
      experiment.reference = outputs.front().summary.reference;
    }
  }

  std::vector<VariantResult> results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    results.push_back(result_from_outputs(outputs[i], labels[i]));
  }
  const std::string md = write_comparison(output_dir, experiment, results, outputs);
  out << md << "\nComparison written to " << (output_dir / "comparison.md").string() << ", "
      << (output_dir / "comparison.csv").string() << " and "
      << (output_dir / "report.html").string() << "\n";
  return 0;
}

}  // namespace bertlab
