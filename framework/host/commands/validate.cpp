// `bertlab validate EXPERIMENT`: checks an experiment file against the plugins' option
// declarations and prints each resolved variant, without running anything.

#include <iostream>
#include <memory>

#include "commands/commands.h"
#include "runtime/plugin_host.h"

namespace bertlab {

namespace {

int validate(const ExperimentArgs& args, const PluginOptions& plugins) {
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, plugins);
    ResolvedExperiment experiment = load_experiment(host, args);
    for (const auto& v : experiment.variants) std::cout << v.resolved_toml << "\n";
    std::cout << "# " << args.file << ": " << experiment.variants.size()
              << " variant(s) valid; outputs would go to "
              << (experiment.output_dir / experiment.name).string() << "\n";
    return 0;
  });
}

}  // namespace

Command define_validate_command(CommandLine& parent, PluginOptions& plugins) {
  auto args = std::make_shared<ExperimentArgs>();
  CommandLine command =
      parent.subcommand("validate", "check an experiment file; print each resolved variant");
  add_experiment_args(command, *args, "check");
  add_plugin_options(command, plugins);
  return {command, [args, &plugins] { return validate(*args, plugins); }};
}

}  // namespace bertlab
