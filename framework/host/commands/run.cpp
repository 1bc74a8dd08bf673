// `bertlab run EXPERIMENT`: every variant of an experiment file, then their comparison.

#include <bertlab/log.h>

#include <iostream>
#include <memory>

#include "commands/commands.h"
#include "runtime/plugin_host.h"
#include "train/runner.h"

namespace bertlab {

namespace {

struct RunArgs {
  ExperimentArgs experiment;
  bool resume = false;  ///< --resume: as --set train.resume=true
};

/// "a, b, c": the variants' names.
std::string variant_names(const ResolvedExperiment& experiment) {
  std::string names;
  for (const auto& v : experiment.variants) names += (names.empty() ? "" : ", ") + v.name;
  return names;
}

int run(const RunArgs& args, const PluginOptions& plugins) {
  ExperimentArgs experiment_args = args.experiment;
  if (args.resume) experiment_args.sets.emplace_back("train.resume=true");
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, plugins);
    ResolvedExperiment experiment = load_experiment(host, experiment_args);
    log_versions(host);
    log_info("config", "{}: experiment '{}', {} variant(s): {}", experiment_args.file,
             experiment.name, experiment.variants.size(), variant_names(experiment));
    std::string table = run_experiment(experiment, host);
    if (table.empty()) return 0;  // a rank other than 0 of a launched run
    const std::filesystem::path dir = experiment.output_dir / experiment.name;
    std::cout << table << "\nComparison written to " << (dir / "comparison.md").string() << ", "
              << (dir / "comparison.csv").string() << " and " << (dir / "report.html").string()
              << "\n";
    return 0;
  });
}

}  // namespace

Command define_run_command(CommandLine& parent, PluginOptions& plugins) {
  auto args = std::make_shared<RunArgs>();
  CommandLine command = parent.subcommand("run", "run an experiment's variants and compare them");
  add_experiment_args(command, args->experiment, "run");
  command.option("--output-dir", args->experiment.output_dir,
                 "results folder (default [experiment] output_dir)");
  command.flag("--resume", args->resume,
               "continue each variant from its newest checkpoint (as --set train.resume=true)");
  add_plugin_options(command, plugins);
  return {command, [args, &plugins] { return run(*args, plugins); }};
}

}  // namespace bertlab
