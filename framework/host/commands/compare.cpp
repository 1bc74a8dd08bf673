// `bertlab compare RUN_DIR...`: the comparison and report of finished runs, rebuilt from their
// files (report/compare.cpp does the work).

#include <iostream>
#include <memory>

#include "commands/commands.h"
#include "report/compare.h"

namespace bertlab {

namespace {

struct CompareArgs {
  CompareOptions options;
  std::vector<std::string> runs;  ///< the run folders
  std::string output;             ///< --output; empty: the runs' experiment folder
};

}  // namespace

Command define_compare_command(CommandLine& parent, PluginOptions& /*plugins*/) {
  auto args = std::make_shared<CompareArgs>();
  CommandLine command = parent.subcommand(
      "compare", "rebuild comparison.md/.csv, plots/ and report.html from finished runs");
  command.positionals(
      "runs", args->runs,
      "run folders: runs/EXPERIMENT, runs/EXPERIMENT/VARIANT or VARIANT/seed-S (several, also of "
      "different experiments)",
      /*required=*/true);
  command.option("--output", args->output,
                 "folder for the comparison (default: the experiment folder of the runs)");
  command.option("--reference", args->options.reference,
                 "reference variant for the parameter difference (default: [compare] "
                 "reference, else the first)");
  return {command, [args] {
            CompareOptions options = args->options;
            options.runs.assign(args->runs.begin(), args->runs.end());
            if (!args->output.empty()) options.output = std::filesystem::path(args->output);
            return compare_runs(options, std::cout);
          }};
}

}  // namespace bertlab
