// The `bertlab` executable: parse the command line → load plugins → validate → run.
// Only this file turns exceptions into messages and exit codes: 2 for configuration and plugin
// errors, 1 for anything else.

#include <bertlab/error.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "commands/commands.h"
#include "runtime/threads.h"

namespace bertlab {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitConfig = 2;

/// The commands, in the order `bertlab --help` lists them.
constexpr DefineCommand kCommands[] = {
    define_run_command,     define_validate_command, define_gradcheck_command,
    define_bench_command,   define_inspect_command,  define_convert_command,
    define_compare_command, define_plugins_command,  define_tokenize_command,
    define_launch_command,  define_submit_command,
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

namespace bertlab {
namespace {

/// Takes `--verbose` out of argv (before a `--`, after which the arguments are another
/// command's) and turns it into BERTLAB_DEBUG=1, which every command and the ranks that
/// `bertlab launch` starts read. Returns the new argc.
int take_verbose_flag(int argc, char** argv) {
  int out = 0;
  bool passthrough = false;
  for (int i = 0; i < argc; ++i) {
    if (!passthrough && i > 0 && std::strcmp(argv[i], "--verbose") == 0) {
      setenv("BERTLAB_DEBUG", "1", 1);
      continue;
    }
    passthrough |= std::strcmp(argv[i], "--") == 0;
    argv[out++] = argv[i];
  }
  argv[out] = nullptr;
  return out;
}

}  // namespace
}  // namespace bertlab

int main(int argc, char** argv) {
  using namespace bertlab;
  tune_allocator();
  argc = take_verbose_flag(argc, argv);
  // Messages keep their first part (the what); libtorch's C++ stack traces only with
  // BERTLAB_DEBUG=1 or --verbose (without_stack_trace).
  try {
    return dispatch(argc, argv);
  } catch (const ConfigError& e) {
    for (const auto& line : e.messages()) std::cerr << without_stack_trace(line) << "\n";
    std::cerr << fmt::format("bertlab: {} configuration error{}; nothing was run\n",
                             e.messages().size(), e.messages().size() == 1 ? "" : "s");
    return kExitConfig;
  } catch (const PluginError& e) {
    std::cerr << error_text(e) << "\n";
    return kExitConfig;
  } catch (const Interrupted& e) {
    std::cerr << error_text(e) << "\n";
    return 128 + e.signal();
  } catch (const Error& e) {
    std::cerr << "error: " << error_text(e) << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "error: " << error_text(e) << "\n";
    return kExitFailure;
  }
}
