// `bertlab run EXPERIMENT`: every variant of an experiment file, then their comparison.

#include <bertlab/error.h>
#include <bertlab/log.h>
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "commands/commands.h"
#include "commands/run_jobs.h"
#include "runtime/plugin_host.h"
#include "train/runner.h"

namespace bertlab {

namespace {

struct RunArgs {
  ExperimentArgs experiment;
  bool resume = false;  ///< --resume: as --set train.resume=true
  bool rerun = false;   ///< --rerun: run variants that finished before with the same configuration
  int jobs = 1;         ///< --jobs: runs at the same time, each its own process
  std::vector<std::string> run_seeds;  ///< --run-seed: only these seeds' runs
  bool no_comparison = false;          ///< --no-comparison
};

/// --run-seed: keeps the runs of those seeds (each must be one of the experiment's).
void select_seeds(ResolvedExperiment& experiment, const std::vector<std::string>& arguments) {
  if (arguments.empty()) return;
  std::vector<int64_t> seeds;
  for (const auto& a : arguments) {
    size_t used = 0;
    int64_t seed = -1;
    try {
      seed = std::stoll(a, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    BERTLAB_CHECK_AS(ConfigError, used == a.size() && seed >= 0,
                     "--run-seed {}: expected a seed, an integer >= 0", a);
    seeds.push_back(seed);
  }
  for (const int64_t s : seeds) {
    if (std::find(experiment.seeds.begin(), experiment.seeds.end(), s) == experiment.seeds.end() ||
        experiment.seeds.size() < 2) {
      throw ConfigError(fmt::format(
          "--run-seed {}: experiment '{}' runs with seed(s) {}; name one of them (the option "
          "selects among several seeds: [experiment] seeds or repeats)",
          s, experiment.name, fmt::join(experiment.seeds, ", ")));
    }
  }
  std::vector<ResolvedVariant> kept;
  for (auto& v : experiment.variants) {
    if (v.repeat_seed && std::find(seeds.begin(), seeds.end(), *v.repeat_seed) != seeds.end()) {
      kept.push_back(std::move(v));
    }
  }
  experiment.variants = std::move(kept);
}

/// "a, b, c": the variants' names.
std::string variant_names(const ResolvedExperiment& experiment) {
  std::string names;
  for (const auto& v : experiment.variants) names += (names.empty() ? "" : ", ") + v.name;
  return names;
}

void print_comparison(const ResolvedExperiment& experiment, const std::string& table) {
  const std::filesystem::path dir = experiment.output_dir / experiment.name;
  std::cout << table << "\nComparison written to " << (dir / "comparison.md").string() << ", "
            << (dir / "comparison.csv").string() << " and " << (dir / "report.html").string()
            << "\n";
}

int run(const RunArgs& args, const PluginOptions& plugins) {
  ExperimentArgs experiment_args = args.experiment;
  if (args.resume) experiment_args.sets.emplace_back("train.resume=true");
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, plugins);
    ResolvedExperiment experiment = load_experiment(host, experiment_args);
    select_seeds(experiment, args.run_seeds);
    log_versions(host);
    log_info("config", "{}: experiment '{}', {} run(s): {}", experiment_args.file, experiment.name,
             experiment.variants.size(), variant_names(experiment));
    std::string table;
    if (args.jobs > 1) {
      JobsOptions jobs;
      jobs.jobs = args.jobs;
      jobs.rerun = args.rerun;
      jobs.file = experiment_args.file;
      jobs.sets = experiment_args.sets;
      jobs.output_dir = experiment_args.output_dir;
      jobs.plugins = plugins;
      const int code = run_in_processes(experiment, jobs, &table);
      if (!table.empty()) print_comparison(experiment, table);
      return code;
    }
    RunExperimentOptions options;
    options.rerun = args.rerun;
    options.comparison = !args.no_comparison;
    table = run_experiment(experiment, host, options);
    if (table.empty()) return 0;  // a rank other than 0 of a launched run, or --no-comparison
    print_comparison(experiment, table);
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
  command.flag("--rerun", args->rerun,
               "run every variant, also those whose folder holds a finished run of the same "
               "configuration (skipped by default)");
  command.option("--jobs", args->jobs,
                 "runs (variant × seed) at the same time, each its own process sharing the "
                 "cores (default 1: one after another in this process)");
  command.option("--run-seed", args->run_seeds,
                 "with several seeds: run only this seed's runs (repeatable)");
  command.flag("--no-comparison", args->no_comparison,
               "write no comparison after the runs (for runs started one by one, e.g. by a job "
               "array; `bertlab compare` writes it)");
  add_plugin_options(command, plugins);
  return {command, [args, &plugins] { return run(*args, plugins); }};
}

}  // namespace bertlab
