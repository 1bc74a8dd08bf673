#pragma once
// `bertlab plugins --describe NAME | --all [--format text|markdown]`: the components' options,
// generated from the same declarations that validate experiment files.

#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/registry.h"

namespace bertlab {

enum class DescribeFormat {
  kText,      ///< aligned tables, with the file each plugin was loaded from
  kMarkdown,  ///< docs/plugin-reference.md: no file paths, so every checkout generates the same
};

/// "text" or "markdown"; anything else is a ConfigError naming the flag.
DescribeFormat parse_describe_format(const std::string& value);

/// Describes `components` (with their kind's host keys) in `format`.
void describe_components(const std::vector<const Component*>& components, DescribeFormat format,
                         std::ostream& out);

/// Every component of `registry` by kind (task, strategy, optimizer), then by name, and its tools.
void describe_all(const ComponentRegistry& registry, DescribeFormat format, std::ostream& out);

}  // namespace bertlab
