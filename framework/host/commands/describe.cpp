// `bertlab plugins --describe`: components' option tables, as text or markdown.

#include "commands/describe.h"

#include <bertlab/error.h>
#include <bertlab/strategy.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <tuple>

#include "config/host_options.h"

namespace bertlab {

namespace {

std::vector<OptionDecl> host_keys(ComponentKind kind) {
  if (kind == ComponentKind::kStrategy) return strategy_host_options();
  if (kind == ComponentKind::kAdversarial) return {adversarial_plugin_option()};
  return {plugin_option(to_string(kind))};
}

std::string default_text(const OptionDecl& d) {
  std::string def = d.required        ? "(required)"
                    : d.default_value ? format_value(*d.default_value)
                                      : "";
  if (d.type == OptionType::kPath && !d.required && def == "\"\"") def = "(none)";
  return def;
}

/// The replicas a contract is described for.
constexpr int kDescribedReplicas = 2;

/// A strategy's contract with its default options, then for each value of a string option
/// that changes it; empty for a component without a contract.
std::vector<std::string> contract_lines(const Component& c) {
  std::vector<std::string> lines;
  if (!c.spec.contract) return lines;
  const auto summary = [&](std::map<std::string, OptionValue> values) {
    return c.spec.contract(ConfigView(to_string(c.kind), c.spec.options, std::move(values)),
                           kDescribedReplicas);
  };
  const StrategyContract defaults = summary({});
  lines.push_back(fmt::format("{} (default options, {} replicas): {}", defaults.summary(),
                              kDescribedReplicas, defaults.derivation));
  for (const auto& d : c.spec.options) {
    for (const auto& value : d.allowed) {
      const StrategyContract other = summary({{d.key, value}});
      if (other.summary() == defaults.summary()) continue;
      lines.push_back(
          fmt::format("with {} = \"{}\": {}: {}", d.key, value, other.summary(), other.derivation));
    }
  }
  return lines;
}

void text_option(const OptionDecl& d, bool host_key, std::ostream& out) {
  out << fmt::format("  {:<28} {:<7} {:<16} {:<24} {}{}\n", d.key, to_string(d.type),
                     default_text(d), d.rule(), d.doc, host_key ? " [host]" : "");
}

void text_component(const Component& c, std::ostream& out) {
  out << fmt::format("{} '{}': {}\n", to_string(c.kind), c.spec.name, c.spec.description);
  out << fmt::format("plugin {} {} from {}\n\n", c.origin.plugin_name, c.origin.plugin_version,
                     c.origin.file.string());
  out << fmt::format("[{}] keys:\n", to_string(c.kind));
  out << fmt::format("  {:<28} {:<7} {:<16} {:<24} {}\n", "KEY", "TYPE", "DEFAULT", "RULE",
                     "DESCRIPTION");
  for (const auto& d : host_keys(c.kind)) text_option(d, true, out);
  for (const auto& d : c.spec.options) text_option(d, false, out);
  const auto contract = contract_lines(c);
  if (!contract.empty()) {
    out << "\ncontract (docs/strategy-contracts.md):\n";
    for (const auto& line : contract) out << "  " << line << "\n";
  }
  out << "\n";
}

/// A table cell: `|` would end the cell, a newline the row.
std::string cell(const std::string& text) {
  std::string escaped;
  for (char ch : text) {
    if (ch == '|') {
      escaped += "\\|";
    } else if (ch == '\n') {
      escaped += ' ';
    } else {
      escaped += ch;
    }
  }
  return escaped;
}

std::string code_cell(const std::string& text) {
  return text.empty() ? "" : "`" + cell(text) + "`";
}

void markdown_table(const std::vector<OptionDecl>& options, std::ostream& out) {
  out << "| key | type | default | rule | description |\n";
  out << "|---|---|---|---|---|\n";
  for (const auto& d : options) {
    const std::string def = default_text(d);
    out << fmt::format("| `{}` | {} | {} | {} | {} |\n", cell(d.key), to_string(d.type),
                       def.empty() || def.front() == '(' ? cell(def) : code_cell(def),
                       cell(d.rule()), cell(d.doc));
  }
}

void markdown_component(const Component& c, std::ostream& out) {
  out << fmt::format("### {} `{}`\n\n", to_string(c.kind), c.spec.name);
  out << fmt::format("{}\n\n", c.spec.description);
  out << fmt::format("Plugin `{}` {}. ", c.origin.plugin_name, c.origin.plugin_version);
  if (c.spec.options.empty()) {
    out << fmt::format("No keys besides the host's [{}] keys.\n\n", to_string(c.kind));
  } else {
    out << fmt::format("Keys of [{}] besides the host's:\n\n", to_string(c.kind));
    markdown_table(c.spec.options, out);
    out << "\n";
  }
  const auto contract = contract_lines(c);
  if (contract.empty()) return;
  out << "Contract ([strategy contracts](strategy-contracts.md)):\n\n";
  for (const auto& line : contract) out << "- " << line << "\n";
  out << "\n";
}

const char* kind_title(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kTask:
      return "Tasks";
    case ComponentKind::kStrategy:
      return "Strategies";
    case ComponentKind::kOptimizer:
      return "Optimizers";
    case ComponentKind::kAdversarial:
      return "Adversarial training";
  }
  return "";
}

void markdown_all(const std::vector<const Component*>& components, const std::vector<Tool>& tools,
                  std::ostream& out) {
  out << "# Plugin reference\n\n";
  out << "Every component the loaded plugins register, with its options, generated from their "
         "option\ndeclarations by `bertlab plugins --describe --all --format markdown`: do not "
         "edit by hand.\nThe same declarations validate experiment files; see docs/plugins.md "
         "for how to write a plugin.\n\n";
  for (ComponentKind kind : {ComponentKind::kTask, ComponentKind::kStrategy,
                             ComponentKind::kOptimizer, ComponentKind::kAdversarial}) {
    out << fmt::format("## {}\n\n", kind_title(kind));
    out << fmt::format("Keys of [{}] that the host owns, shared by every {}:\n\n", to_string(kind),
                       to_string(kind));
    markdown_table(host_keys(kind), out);
    out << "\n";
    for (const Component* c : components) {
      if (c->kind == kind) markdown_component(*c, out);
    }
  }
  if (tools.empty()) return;
  out << "## Tools\n\n";
  out << "Run as `bertlab GROUP NAME ...`.\n\n";
  out << "| command | plugin | description |\n|---|---|---|\n";
  for (const auto& t : tools) {
    out << fmt::format("| `bertlab {} {}` | `{}` {} | {} |\n", cell(t.group), cell(t.name),
                       cell(t.origin.plugin_name), cell(t.origin.plugin_version),
                       cell(t.description));
  }
}

}  // namespace

DescribeFormat parse_describe_format(const std::string& value) {
  if (value == "text") return DescribeFormat::kText;
  if (value == "markdown") return DescribeFormat::kMarkdown;
  throw ConfigError(
      fmt::format("plugins --format: '{}' is not a format; use text or markdown", value));
}

void describe_components(const std::vector<const Component*>& components, DescribeFormat format,
                         std::ostream& out) {
  for (const Component* c : components) {
    if (format == DescribeFormat::kText) {
      text_component(*c, out);
    } else {
      markdown_component(*c, out);
      out << fmt::format("Keys of [{}] that the host owns:\n\n", to_string(c->kind));
      markdown_table(host_keys(c->kind), out);
      out << "\n";
    }
  }
}

void describe_all(const ComponentRegistry& registry, DescribeFormat format, std::ostream& out) {
  std::vector<const Component*> components = registry.all();
  std::stable_sort(components.begin(), components.end(),
                   [](const Component* a, const Component* b) {
                     if (a->kind != b->kind)
                       return static_cast<int>(a->kind) < static_cast<int>(b->kind);
                     return a->spec.name < b->spec.name;
                   });
  std::vector<Tool> tools = registry.tools();
  std::stable_sort(tools.begin(), tools.end(), [](const Tool& a, const Tool& b) {
    return std::tie(a.group, a.name) < std::tie(b.group, b.name);
  });
  if (format == DescribeFormat::kMarkdown) {
    markdown_all(components, tools, out);
    return;
  }
  describe_components(components, format, out);
  if (tools.empty()) return;
  out << "tools:\n";
  for (const auto& t : tools) {
    out << fmt::format("  bertlab {:<28} {} (plugin {} {} from {})\n", t.group + " " + t.name,
                       t.description, t.origin.plugin_name, t.origin.plugin_version,
                       t.origin.file.string());
  }
}

}  // namespace bertlab
