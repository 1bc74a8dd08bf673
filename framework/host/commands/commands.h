#pragma once
// The commands of `bertlab`, one file each; main.cpp lists them in the order `--help` shows.

#include <ostream>
#include <string>
#include <vector>

#include "commands/command.h"

namespace bertlab {

Command define_run_command(CommandLine& parent, PluginOptions& plugins);        // run.cpp
Command define_validate_command(CommandLine& parent, PluginOptions& plugins);   // validate.cpp
Command define_gradcheck_command(CommandLine& parent, PluginOptions& plugins);  // gradcheck.cpp
Command define_bench_command(CommandLine& parent, PluginOptions& plugins);      // bench.cpp
Command define_inspect_command(CommandLine& parent, PluginOptions& plugins);    // inspect.cpp
Command define_convert_command(CommandLine& parent, PluginOptions& plugins);    // convert.cpp
Command define_export_command(CommandLine& parent, PluginOptions& plugins);     // export.cpp
Command define_compare_command(CommandLine& parent, PluginOptions& plugins);    // compare.cpp
Command define_plugins_command(CommandLine& parent, PluginOptions& plugins);    // plugins.cpp
Command define_tokenize_command(CommandLine& parent,
                                PluginOptions& plugins);                     // tokenize_command.cpp
Command define_launch_command(CommandLine& parent, PluginOptions& plugins);  // launch.cpp
Command define_submit_command(CommandLine& parent, PluginOptions& plugins);  // submit.cpp

// Plugin tools (tool.cpp): `bertlab GROUP TOOL ...`, the groups and tools the plugins add.

/// Whether argv names no built-in command of `app` (nor of a built-in group such as `bench`),
/// so that it is a plugin tool's command line.
bool names_plugin_tool(CLI::App& app, const std::vector<std::string>& args);

/// Runs the plugin tool `args` names (GROUP TOOL ARGS...); --plugin-dir and
/// --allow-insecure-plugins before a `--` are the host's, the rest the tool's.
int run_plugin_tool(const std::vector<std::string>& args);

// Help (help.cpp).

/// The help's list of the tools the plugins found contribute (`bertlab GROUP TOOL`).
std::string plugin_tools_footer(const PluginOptions& plugins);

/// docs/cli.md: every command's help, generated from the definitions that parse the command
/// line (`bertlab --cli-reference > docs/cli.md`; a test fails when the file is stale).
void print_cli_reference(CLI::App& app, std::ostream& out);

}  // namespace bertlab
