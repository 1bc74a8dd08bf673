// `bertlab GROUP TOOL ARGS...`: the command-line tools plugins add (`bertlab squad evaluate`,
// `bertlab pretrain create-data`, `bertlab bench squad-features`). The host takes its plugin
// flags; the rest of the line is the tool's, which keeps Google's flag names.

#include <bertlab/error.h>
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "commands/commands.h"
#include "runtime/plugin_host.h"

namespace bertlab {

namespace {

/// The subcommand of `app` named `name`, or null.
CLI::App* find_subcommand(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return sub;
  }
  return nullptr;
}

int run_tool(const PluginOptions& plugins, const std::vector<std::string>& args) {
  const std::string& group = args.front();
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, plugins);
    if (args.size() < 2) throw ConfigError(fmt::format("bertlab {}: name a tool", group));
    const Tool* tool = host.registry().find_tool(group, args[1]);
    if (tool == nullptr) {
      std::vector<std::string> names;
      for (const auto& t : host.registry().tools()) names.push_back(t.group + " " + t.name);
      throw ConfigError(
          fmt::format("bertlab {} {}: no such tool; tools: {}", group, args[1],
                      names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
    return tool->main(std::vector<std::string>(args.begin() + 2, args.end()));
  });
}

}  // namespace

bool names_plugin_tool(CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].empty() || args[0][0] == '-') return false;
  CLI::App* command = find_subcommand(app, args[0]);
  if (command == nullptr) return true;
  // A group of built-in subcommands (bench) that plugins extend with tools.
  const bool group = !command->get_subcommands({}).empty();
  return group && args.size() >= 2 && !args[1].empty() && args[1][0] != '-' &&
         find_subcommand(*command, args[1]) == nullptr;
}

int run_plugin_tool(const std::vector<std::string>& args) {
  // The host's flags anywhere before `--`; everything else, in order, is GROUP TOOL and the
  // tool's arguments (its --help included).
  CLI::App parser{"bertlab GROUP TOOL"};
  parser.set_help_flag();
  parser.allow_extras();
  PluginOptions plugins;
  CommandLine line(&parser);
  add_plugin_options(line, plugins);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    parser.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw ConfigError(fmt::format("bertlab {}: {}", args.front(), e.what()));
  }
  return run_tool(plugins, parser.remaining());
}

}  // namespace bertlab
