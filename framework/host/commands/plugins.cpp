// `bertlab plugins [--describe NAME | --all] [--format text|markdown]`: the components and tools
// of every plugin found, or the options of some (describe.cpp writes them).

#include <bertlab/error.h>
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands/commands.h"
#include "commands/describe.h"
#include "runtime/plugin_host.h"

namespace bertlab {

namespace {

struct PluginsArgs {
  std::string describe;         ///< --describe NAME
  bool describe_given = false;  ///< --describe was on the command line (with or without NAME)
  bool all = false;             ///< --all
  std::string format = "text";  ///< --format text|markdown
};

/// One line per component and per tool: kind, name, version, description, file.
void list_components(const ComponentRegistry& registry, std::ostream& out) {
  constexpr const char* kLine = "{:<10} {:<20} {:<8} {:<40} {}\n";
  out << fmt::format(kLine, "KIND", "NAME", "VERSION", "DESCRIPTION", "FILE");
  for (const Component* c : registry.all()) {
    out << fmt::format(kLine, to_string(c->kind), c->spec.name, c->origin.plugin_version,
                       c->spec.description, c->origin.file.string());
  }
  for (const auto& t : registry.tools()) {
    out << fmt::format(kLine, "tool", t.group + " " + t.name, t.origin.plugin_version,
                       t.description, t.origin.file.string());
  }
}

/// The components named `name` (of any kind), described in `format`.
void describe_named(const ComponentRegistry& registry, const std::string& name,
                    DescribeFormat format, std::ostream& out) {
  auto found = registry.find_any(name);
  if (found.empty()) {
    std::vector<std::string> names;
    for (const Component* c : registry.all()) names.push_back(c->spec.name);
    auto close = closest_match(name, names);
    throw PluginError(fmt::format("--describe {}: no component of that name{}; known: {}", name,
                                  close ? fmt::format("; did you mean '{}'?", *close) : "",
                                  fmt::join(names, ", ")));
  }
  describe_components(found, format, out);
}

int plugins_command(const PluginsArgs& args, const PluginOptions& plugins) {
  if (args.describe_given && args.describe.empty() && !args.all) {
    throw ConfigError("plugins --describe: name a component, or pass --all for every one");
  }
  if (args.all && !args.describe.empty()) {
    throw ConfigError(fmt::format(
        "plugins --describe {} --all: pass either a component's name or --all, not both",
        args.describe));
  }
  return with_plugin_host([&](PluginHost& host) -> int {
    const DescribeFormat format = parse_describe_format(args.format);
    load_plugins(host, plugins);
    if (args.all) {
      describe_all(host.registry(), format, std::cout);
    } else if (args.describe.empty()) {
      list_components(host.registry(), std::cout);
    } else {
      describe_named(host.registry(), args.describe, format, std::cout);
    }
    return 0;
  });
}

}  // namespace

Command define_plugins_command(CommandLine& parent, PluginOptions& plugins) {
  auto args = std::make_shared<PluginsArgs>();
  CommandLine command = parent.subcommand("plugins", "list the components of every plugin");
  command.optional_value_option("--describe", args->describe,
                                "print the options of the component NAME");
  command.flag("--all", args->all,
               "with --describe (no NAME): every component's options and every tool");
  command.option("--format", args->format, "text (default) or markdown (docs/plugin-reference.md)");
  add_plugin_options(command, plugins);
  return {command, [args, command, &plugins] {
            args->describe_given = command.given("--describe");
            return plugins_command(*args, plugins);
          }};
}

}  // namespace bertlab
