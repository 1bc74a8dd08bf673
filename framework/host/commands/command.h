#pragma once
// What the commands of `bertlab` share: a command is a subcommand whose options are bound
// to state its action owns; main.cpp holds the table of them. Also here: the plugin-folder
// flags, loading plugins into a PluginHost whose exceptions outlive it, and the experiment
// arguments of run, validate and gradcheck.

#include <functional>
#include <string>
#include <vector>

#include "commands/command_line.h"
#include "config/experiment.h"

namespace bertlab {

class PluginHost;

/// `--plugin-dir` and `--allow-insecure-plugins`, shared by every command that loads plugins.
struct PluginOptions {
  std::vector<std::string> plugin_dirs;  ///< extra folders, before BERTLAB_PLUGIN_PATH's
  bool allow_insecure = false;           ///< load files or folders every user may write
};

/// One command: its subcommand in the application, and what runs when the command line chose it
/// (returns the exit code).
struct Command {
  CommandLine command;
  std::function<int()> action;
};

/// Adds a command's subcommand to `parent`; plugin folders go to `plugins`, which outlives it.
using DefineCommand = Command (*)(CommandLine& parent, PluginOptions& plugins);

/// Adds `--plugin-dir` and `--allow-insecure-plugins` to `command`.
void add_plugin_options(CommandLine& command, PluginOptions& plugins);

/// Loads the plugins of `plugins`' folders and the default search path into `host`.
void load_plugins(PluginHost& host, const PluginOptions& plugins);

/// Logs the versions of bertlab, libtorch, the BLAS and each plugin loaded (tag [plugin]).
void log_versions(const PluginHost& host);

/// Runs `body(host)` with a fresh PluginHost and returns what it returns. An exception a plugin
/// throws may have its type's code in the plugin, which goes when the host unloads it: what
/// `body` throws reaches the caller as a copy made by the host library.
int with_plugin_host(const std::function<int(PluginHost&)>& body);

/// The experiment file and its selection, as run, validate and gradcheck take them.
struct ExperimentArgs {
  std::string file;                   ///< experiment TOML file
  std::vector<std::string> sets;      ///< --set SECTION.KEY=VALUE
  std::vector<std::string> variants;  ///< --variant NAME; empty: every variant
  std::string output_dir;             ///< --output-dir; empty: [experiment] output_dir
};

/// Adds the positional experiment file, --variant and --set to `command` (`verb`: what the
/// command does to a variant, for --variant's help).
void add_experiment_args(CommandLine& command, ExperimentArgs& args, const std::string& verb);

/// Parses and resolves the experiment `args` name against the plugins `host` loaded. Throws
/// ConfigError with every problem found.
ResolvedExperiment load_experiment(const PluginHost& host, const ExperimentArgs& args);

}  // namespace bertlab
