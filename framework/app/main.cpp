// `bertlab-host`, the executable behind `bertlab` (app/launcher.cpp) for every command but the
// data commands: parse the command line → load plugins → validate → run. Only this file and the
// launcher turn exceptions into messages and exit codes (exit_status.h): 2 for configuration
// and plugin errors, 1 for anything else.

#include <bertlab/error.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "commands/commands.h"
#include "exit_status.h"
#include "runtime/gemm.h"
#include "runtime/threads.h"

namespace bertlab {
namespace {

/// The commands, in the order `bertlab --help` lists them.
constexpr DefineCommand kCommands[] = {
    define_run_command,      define_validate_command, define_gradcheck_command,
    define_bench_command,    define_inspect_command,  define_convert_command,
    define_export_command,   define_compare_command,  define_plugins_command,
    define_tokenize_command, define_launch_command,   define_submit_command,
};

/// Whether the command line asks for the top-level help (which lists the plugins' tools too).
bool wants_top_help(int argc, char** argv) {
  return argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0;
}

int dispatch(int argc, char** argv) {
  CLI::App app{"bertlab: BERT experiments on LibTorch, wired from TOML by plugins", "bertlab"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("bertlab ") + BERTLAB_VERSION);
  // Taken out of argv by main() before parsing (any position before `--`); listed for --help.
  bool verbose = false;
  app.add_flag("--verbose", verbose,
               "error messages keep libtorch's C++ stack traces (as BERTLAB_DEBUG=1)");
  PluginOptions plugins;
  CommandLine root(&app);
  std::vector<Command> commands;
  for (DefineCommand define : kCommands) commands.push_back(define(root, plugins));

  const bool reference = argc == 2 && std::strcmp(argv[1], "--cli-reference") == 0;
  if (reference || wants_top_help(argc, argv)) app.footer(plugin_tools_footer(plugins));
  if (reference) {
    print_cli_reference(app, std::cout);
    return 0;
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (names_plugin_tool(app, args)) return run_plugin_tool(args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitConfig;
  }
  for (const Command& command : commands) {
    if (command.command.parsed()) return command.action();
  }
  return kExitConfig;
}

}  // namespace
}  // namespace bertlab

int main(int argc, char** argv) {
  using namespace bertlab;
  tune_allocator();
  argc = take_verbose_flag(argc, argv);
  try {
    set_gemm_backend_from_environment();
    return dispatch(argc, argv);
  } catch (...) {
    return report_exception();
  }
}
