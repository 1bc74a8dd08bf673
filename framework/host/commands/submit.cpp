// `bertlab submit EXP.toml --slurm`: an experiment's runs (variant × seed) as a Slurm job array,
// one array task per run, each a `bertlab run --variant V [--run-seed S] --no-comparison`;
// `bertlab compare` aggregates them once the array is done.

#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/log.h>
#include <fmt/format.h>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "commands/commands.h"
#include "runtime/child_process.h"
#include "runtime/plugin_host.h"
#include "train/run_options.h"
#include "train/runner.h"

namespace bertlab {

namespace fs = std::filesystem;

namespace {

struct SubmitArgs {
  ExperimentArgs experiment;
  bool slurm = false;     ///< --slurm (the one engine for now)
  std::string partition;  ///< --partition
  std::string time;       ///< --time, as sbatch takes it
  int gpus_per_run = 0;   ///< --gpus-per-run
  int max_parallel = 0;   ///< --max-parallel: the array's %K
  bool dry_run = false;   ///< print the scripts, submit nothing
  bool wait = false;      ///< sbatch --wait
  bool rerun = false;     ///< also runs that finished before
};

/// `s` quoted for bash when it needs it.
std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                                       "QRSTUVWXYZ0123456789._-/=,+:@%") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string join_quoted(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

/// The runs of one job array: all need the same number of Slurm tasks.
struct ArrayPlan {
  int tasks = 1;  ///< ranks per run: a launcher = "env" variant's replicas, else 1
  std::vector<const ResolvedVariant*> runs;
};

/// The sbatch script of one array: task i runs runs[i].
std::string array_script(const ResolvedExperiment& experiment, const ArrayPlan& plan,
                         const SubmitArgs& args, const std::string& exe) {
  const fs::path dir = experiment.output_dir / experiment.name;
  std::string s = "#!/usr/bin/env bash\n";
  s += fmt::format("# Written by `bertlab submit --slurm` for {}: one array task per run.\n",
                   experiment.file.string());
  s += fmt::format("#SBATCH --job-name=bertlab-{}\n", experiment.name);
  s += fmt::format("#SBATCH --array=0-{}{}\n", plan.runs.size() - 1,
                   args.max_parallel > 0 ? fmt::format("%{}", args.max_parallel) : "");
  s += fmt::format("#SBATCH --ntasks={}\n", plan.tasks);
  s += fmt::format("#SBATCH --output={}\n", (dir / "slurm" / "%x-%A_%a.out").string());
  if (!args.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", args.partition);
  if (!args.time.empty()) s += fmt::format("#SBATCH --time={}\n", args.time);
  if (args.gpus_per_run > 0) s += fmt::format("#SBATCH --gpus={}\n", args.gpus_per_run);
  s += "set -euo pipefail\n";
  s += "case \"$SLURM_ARRAY_TASK_ID\" in\n";
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    const ResolvedVariant& v = *plan.runs[i];
    std::vector<std::string> select = {"--variant", v.name};
    if (v.repeat_seed) select.insert(select.end(), {"--run-seed", std::to_string(*v.repeat_seed)});
    s += fmt::format("  {}) run=({}) ;;\n", i, join_quoted(select));
  }
  s += "  *) echo \"no run for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 2 ;;\nesac\n";
  std::vector<std::string> command = {exe, "run", fs::absolute(experiment.file).string()};
  for (const auto& set : args.experiment.sets) command.insert(command.end(), {"--set", set});
  command.insert(command.end(),
                 {"--output-dir", experiment.output_dir.string(), "--no-comparison", "--rerun"});
  // A run stopped before (a time limit, a preemption) continues from its newest checkpoint; one
  // with none starts at step 0. --rerun starts every run afresh.
  if (!args.rerun) command.push_back("--resume");
  // One run's ranks are the job's tasks (srun starts them, launcher = "env" finds its rank in
  // SLURM_PROCID); a one-process run runs in the batch step itself.
  const std::string launcher = plan.tasks > 1 ? fmt::format("srun -n {} ", plan.tasks) : "";
  s += fmt::format("{}{} \"${{run[@]}}\"\n", launcher, join_quoted(command));
  return s;
}

/// Runs `sbatch --parsable [--wait] [--dependency=afterok:ID:...] SCRIPT`; returns the job id.
std::string sbatch(const fs::path& script, bool wait, const std::vector<std::string>& after) {
  std::vector<std::string> command = {"sbatch", "--parsable"};
  if (wait) command.push_back("--wait");
  if (!after.empty()) {
    // Every task of those arrays must succeed; if one fails the array is cancelled, not left
    // pending for ever.
    command.push_back(fmt::format("--dependency=afterok:{}", fmt::join(after, ":")));
    command.push_back("--kill-on-invalid-dep=yes");
  }
  command.push_back(script.string());
  ChildProcess child = start_child(command, {}, "submit");
  std::string output;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(child.fd, buffer, sizeof(buffer))) > 0) {
    output.append(buffer, static_cast<size_t>(n));
  }
  reap(child);
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  BERTLAB_CHECK(child.exit_code == 0, "submit: sbatch {} {}: {}", script.string(), child.how,
                output);
  // --parsable prints JOBID[;CLUSTER] on a line of its own (stderr shares the pipe).
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0])) != 0) {
      return line.substr(0, line.find(';'));
    }
  }
  throw Error(fmt::format("submit: sbatch {} printed no job id: {}", script.string(), output));
}

int submit(const SubmitArgs& args, const PluginOptions& plugins) {
  BERTLAB_CHECK_AS(ConfigError, args.slurm,
                   "submit: name the engine: --slurm (the one bertlab submits to)");
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, plugins);
    const ResolvedExperiment experiment = load_experiment(host, args.experiment);
    // [stage, tasks per run]: the runs of a stage (init_from) wait for the earlier stages'.
    std::map<std::pair<int, int>, ArrayPlan> arrays;
    size_t finished = 0;
    for (const auto& v : experiment.variants) {
      if (!args.rerun && finished_run(experiment, v)) {
        ++finished;
        continue;
      }
      const RunOptions o = RunOptions::from_variant(v);
      const int tasks = o.env_launcher ? o.replicas : 1;
      ArrayPlan& plan = arrays[{v.stage, tasks}];
      plan.tasks = tasks;
      plan.runs.push_back(&v);
    }
    const fs::path dir = experiment.output_dir / experiment.name;
    if (arrays.empty()) {
      log_info("submit", "every run of '{}' finished before ({}); nothing to submit",
               experiment.name, finished);
    }
    const std::string exe = self_executable();
    int index = 0;
    std::vector<std::string> earlier;  // the arrays of the earlier stages
    std::vector<std::string> this_stage;
    int stage = 0;
    for (const auto& [key, plan] : arrays) {
      if (key.first != stage) {
        earlier.insert(earlier.end(), this_stage.begin(), this_stage.end());
        this_stage.clear();
        stage = key.first;
      }
      const std::string script = array_script(experiment, plan, args, exe);
      if (args.dry_run) {
        if (stage > 0) {
          std::cout << fmt::format(
              "# stage {}: submitted with --dependency=afterok: on the "
              "arrays of the stages before\n",
              stage);
        }
        std::cout << script;
        continue;
      }
      fs::create_directories(dir / "slurm");
      const fs::path file = dir / "slurm" / fmt::format("array-{}.sh", index++);
      write_file_atomic(file, script);
      // With --wait each array is done before the next is submitted: no dependency needed.
      const std::string id =
          sbatch(file, args.wait, args.wait ? std::vector<std::string>() : earlier);
      this_stage.push_back(id);
      std::cout << fmt::format(
          "Submitted job array {} ({} run(s), {} task(s) each{}): {}\n", id, plan.runs.size(),
          key.second,
          earlier.empty() || args.wait ? "" : fmt::format(", after {}", fmt::join(earlier, ", ")),
          file.string());
    }
    if (!args.dry_run && !arrays.empty()) {
      std::cout << fmt::format("When it is done: {} compare {}\n", shell_quote(exe),
                               shell_quote(dir.string()));
    }
    return 0;
  });
}

}  // namespace

Command define_submit_command(CommandLine& parent, PluginOptions& plugins) {
  auto args = std::make_shared<SubmitArgs>();
  CommandLine command = parent.subcommand(
      "submit", "submit an experiment's runs (variant × seed) as a Slurm job array");
  add_experiment_args(command, args->experiment, "submit");
  command.option("--output-dir", args->experiment.output_dir,
                 "results folder (default [experiment] output_dir; must be shared by the nodes)");
  command.flag("--slurm", args->slurm, "submit to Slurm with sbatch (required)");
  command.option("--partition", args->partition, "sbatch --partition");
  command.option("--time", args->time, "sbatch --time per run, e.g. 2:00:00");
  command.option("--gpus-per-run", args->gpus_per_run, "sbatch --gpus per array task");
  command.option("--max-parallel", args->max_parallel,
                 "array tasks running at once (sbatch --array=...%K)");
  command.flag("--dry-run", args->dry_run, "print the sbatch script(s); submit nothing");
  command.flag("--wait", args->wait, "return when the array is done (sbatch --wait)");
  command.flag("--rerun", args->rerun,
               "also submit runs that finished before with the same configuration");
  add_plugin_options(command, plugins);
  return {command, [args, &plugins] { return submit(*args, plugins); }};
}

}  // namespace bertlab
