// Parsing an experiment file into sections, variants and settings with their source positions.
// toml++ drops source positions when nodes are copied, so settings are converted to plain values
// with their Location right here, and merging works on those.

#include "config/experiment.h"

#include <bertlab/error.h>

#include <toml++/toml.h>

#include <algorithm>
#include <string_view>

namespace bertlab {

namespace fs = std::filesystem;

std::string Location::format() const {
  if (from_set) return fmt::format("--set '{}'", origin);
  if (line <= 0) return origin;
  return fmt::format("{}:{}:{}", origin, line, column);
}

std::optional<std::string> path_component_problem(const std::string& name) {
  if (name.empty()) return std::string("must not be empty");
  if (name == "." || name == "..") {
    return fmt::format("'{}' is not a folder name of its own; use letters and digits", name);
  }
  for (const char c : name) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("._-=,+").find(c) != std::string_view::npos;
    if (!safe) {
      return fmt::format(
          "'{}' has '{}'; a name becomes one folder of the outputs, so use only letters, digits "
          "and . _ - = , +",
          name, c);
    }
  }
  return std::nullopt;
}

const std::vector<std::string>& known_sections() {
  static const std::vector<std::string> sections = {"experiment", "model",       "task", "strategy",
                                                    "optimizer",  "adversarial", "train"};
  return sections;
}

namespace {

Location location_of(const toml::node& node, const std::string& origin) {
  const auto& src = node.source();
  return Location{origin, static_cast<int64_t>(src.begin.line),
                  static_cast<int64_t>(src.begin.column), false};
}

/// The key's own position (toml++ records one for keys), else its value's.
Location key_location(const toml::key& key, const toml::node& value, const std::string& origin) {
  const auto& src = key.source();
  if (src.begin.line == 0) return location_of(value, origin);
  return Location{origin, static_cast<int64_t>(src.begin.line),
                  static_cast<int64_t>(src.begin.column), false};
}

const char* toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "value";
  }
}

Setting to_setting(const toml::node& node, Location loc) {
  Setting s;
  s.value_loc = node.source().begin.line > 0 ? location_of(node, loc.origin) : loc;
  s.value_loc.from_set = loc.from_set;
  s.loc = std::move(loc);
  s.toml_type = toml_type_name(node);
  if (auto v = node.as_boolean()) {
    s.value = v->get();
  } else if (auto i = node.as_integer()) {
    s.value = static_cast<int64_t>(i->get());
  } else if (auto f = node.as_floating_point()) {
    s.value = f->get();
  } else if (auto str = node.as_string()) {
    s.value = str->get();
  }
  return s;
}

// Reads the scalar keys of one section table; nested tables and arrays are kept as non-scalar
// settings so validation can report them with their position.
SectionData read_section(const toml::table& table, const std::string& origin) {
  SectionData data;
  data.present = true;
  data.loc = location_of(table, origin);
  for (const auto& [key, node] : table) {
    data.keys[std::string(key.str())] = to_setting(node, key_location(key, node, origin));
  }
  return data;
}

// The file being parsed and every problem found so far.
struct ParseState {
  std::string origin;  // the file's path, as messages name it
  ExperimentFile out;
  std::vector<std::string> errors;
};

// Reads the `index`th [[variant]] table into state.out.variants.
void read_variant(const toml::table& table, size_t index, ParseState& state) {
  const std::string& origin = state.origin;
  std::vector<std::string>& errors = state.errors;
  VariantData variant;
  variant.loc = location_of(table, origin);
  for (const auto& [key_node, node] : table) {
    const std::string key(key_node.str());
    Location loc = key_location(key_node, node, origin);
    if (key == "name") {
      if (auto name = node.as_string()) {
        variant.name = name->get();
        if (auto problem = path_component_problem(variant.name); problem && !variant.name.empty()) {
          errors.push_back(
              fmt::format("{}: variant.name: {}", location_of(node, origin).format(), *problem));
        }
      } else {
        errors.push_back(fmt::format("{}: variant.name: must be a string, got {}", loc.format(),
                                     toml_type_name(node)));
      }
      continue;
    }
    if (key == "expect" || key == "rtol" || key == "atol") {
      variant.expectation[key] = to_setting(node, loc);
      continue;
    }
    const auto& sections = known_sections();
    if (std::find(sections.begin(), sections.end(), key) != sections.end()) {
      if (auto sub = node.as_table()) {
        variant.sections[key] = read_section(*sub, origin);
      } else {
        errors.push_back(
            fmt::format("{}: variant.{}: must be a table of overrides, e.g. {}.KEY = VALUE",
                        loc.format(), key, key));
      }
      continue;
    }
    std::string hint;
    std::vector<std::string> variant_keys = sections;
    variant_keys.insert(variant_keys.end(), {"name", "expect", "rtol", "atol"});
    if (auto close = closest_match(key, variant_keys)) {
      hint = fmt::format("; did you mean '{}'?", *close);
    } else {
      hint =
          "; a variant holds `name` and overrides of sections, e.g. optimizer.learning_rate = "
          "1e-4";
    }
    errors.push_back(fmt::format("{}: variant.{}: unknown key{}", loc.format(), key, hint));
  }
  if (variant.name.empty()) {
    errors.push_back(fmt::format("{}: variant: variant #{} has no name; add name = \"...\"",
                                 variant.loc.format(), index + 1));
  }
  state.out.variants.push_back(std::move(variant));
}

// Checks the file exists and parses it as TOML; a syntax error names its line and column.
toml::table parse_toml(const fs::path& path, const std::string& origin) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw ConfigError(fmt::format("{}: experiment file not found", origin));
  }
  try {
    return toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    throw ConfigError(fmt::format("{}:{}:{}: TOML syntax error: {}", origin, src.begin.line,
                                  src.begin.column, e.description()));
  }
}

// Reads [compare]: its one key, reference (a variant name).
void read_compare(const toml::table& table, ParseState& state) {
  for (const auto& [ck, cnode] : table) {
    Location cloc = key_location(ck, cnode, state.origin);
    if (ck.str() == "reference") {
      state.out.reference = to_setting(cnode, cloc);
      if (!cnode.is_string()) {
        state.errors.push_back(
            fmt::format("{}: compare.reference: must be a string (a variant "
                        "name), got {}",
                        cloc.format(), toml_type_name(cnode)));
      }
    } else {
      auto close = closest_match(std::string(ck.str()), {"reference"});
      state.errors.push_back(fmt::format("{}: compare.{}: unknown key{}", cloc.format(), ck.str(),
                                         close ? fmt::format("; did you mean '{}'?", *close) : ""));
    }
  }
}

// The message for a top-level key that is no section, variant or compare.
std::string unknown_top_level(const std::string& key, const toml::node& node, const Location& loc) {
  std::vector<std::string> all = known_sections();
  all.push_back("variant");
  all.push_back("sweep");
  all.push_back("compare");
  auto close = closest_match(key, all);
  std::string what = node.is_table() ? "unknown section" : "unknown top-level key";
  return fmt::format("{}: {}: {}{}", loc.format(), key, what,
                     close ? fmt::format("; did you mean '{}'?", *close)
                           : "; known sections: experiment, model, task, strategy, optimizer, "
                             "adversarial, train, variant, sweep, compare");
}

// [experiment] seeds = [1, 2, 3]: distinct non-negative integers, into state.out.seeds (and out
// of the section's keys, which hold scalars).
void read_seeds(const toml::table& experiment, ParseState& state) {
  const toml::node* node = experiment.get("seeds");
  if (node == nullptr) return;
  state.out.base["experiment"].keys.erase("seeds");
  const Location loc = location_of(*node, state.origin);
  state.out.seeds_loc = loc;
  const toml::array* array = node->as_array();
  if (array == nullptr || array->empty()) {
    state.errors.push_back(fmt::format(
        "{}: experiment.seeds: must be a list of integers, e.g. seeds = [1, 2, 3], got {}",
        loc.format(), array ? "an empty list" : toml_type_name(*node)));
    return;
  }
  for (const auto& element : *array) {
    const auto seed = element.as_integer();
    if (seed == nullptr || seed->get() < 0) {
      state.errors.push_back(
          fmt::format("{}: experiment.seeds: every seed must be an integer >= 0, got {}",
                      location_of(element, state.origin).format(),
                      seed ? std::to_string(seed->get()) : std::string(toml_type_name(element))));
      continue;
    }
    const int64_t value = seed->get();
    if (std::find(state.out.seeds.begin(), state.out.seeds.end(), value) != state.out.seeds.end()) {
      state.errors.push_back(fmt::format("{}: experiment.seeds: seed {} is listed twice",
                                         location_of(element, state.origin).format(), value));
      continue;
    }
    state.out.seeds.push_back(value);
  }
}

// Reads [sweep]: mode, max_runs and [sweep.SECTION] tables of lists.
void read_sweep(const toml::table& table, ParseState& state) {
  Sweep sweep;
  sweep.loc = location_of(table, state.origin);
  for (const auto& [key_node, node] : table) {
    const std::string key(key_node.str());
    const Location loc = key_location(key_node, node, state.origin);
    if (key == "mode") {
      const auto mode = node.as_string();
      if (mode == nullptr || (mode->get() != "grid" && mode->get() != "zip")) {
        state.errors.push_back(fmt::format(
            "{}: sweep.mode: must be \"grid\" (every combination) or \"zip\" (the lists in "
            "lockstep)",
            loc.format()));
      } else {
        sweep.mode = mode->get();
      }
      continue;
    }
    if (key == "max_runs") {
      const auto runs = node.as_integer();
      if (runs == nullptr || runs->get() < 1) {
        state.errors.push_back(
            fmt::format("{}: sweep.max_runs: must be an integer >= 1", loc.format()));
      } else {
        sweep.max_runs = runs->get();
      }
      continue;
    }
    const auto& sections = known_sections();
    const auto section = node.as_table();
    if (section == nullptr || std::find(sections.begin(), sections.end(), key) == sections.end()) {
      auto close = closest_match(key, sections);
      state.errors.push_back(fmt::format(
          "{}: sweep.{}: unknown key{}; a sweep holds mode, max_runs and tables of lists such as "
          "[sweep.optimizer] learning_rate = [5e-5, 1e-4]",
          loc.format(), key, close ? fmt::format("; did you mean [sweep.{}]?", *close) : ""));
      continue;
    }
    for (const auto& [axis_key, axis_node] : *section) {
      SweepAxis axis;
      axis.section = key;
      axis.key = std::string(axis_key.str());
      axis.loc = key_location(axis_key, axis_node, state.origin);
      const auto values = axis_node.as_array();
      if (values == nullptr || values->empty()) {
        state.errors.push_back(
            fmt::format("{}: sweep.{}.{}: must be a non-empty list of values, e.g. [1e-4, 3e-4]",
                        axis.loc.format(), key, axis.key));
        continue;
      }
      for (const auto& v : *values) {
        axis.values.push_back(to_setting(v, location_of(v, state.origin)));
      }
      sweep.axes.push_back(std::move(axis));
    }
  }
  if (sweep.axes.empty()) {
    state.errors.push_back(fmt::format(
        "{}: sweep: no lists to sweep; add e.g. [sweep.optimizer] learning_rate = [5e-5, 1e-4]",
        sweep.loc.format()));
  }
  state.out.sweep = std::move(sweep);
}

/// A sweep value in a variant name: 5e-05, 16, true, adam.
std::string name_value(const Setting& s) {
  if (!s.value) return s.toml_type;
  if (const auto* d = std::get_if<double>(&*s.value)) return fmt::format("{}", *d);
  if (const auto* str = std::get_if<std::string>(&*s.value)) return *str;
  return format_value(*s.value);
}

// The variants of state.out.sweep: each combination of its values (grid, in the order written,
// the last list varying fastest; or zip), alone or applied to each written variant. A generated
// variant is named by its values, `key=value,...` (section.key where two sections share a key),
// after the written variant's name.
void generate_sweep_variants(ParseState& state) {
  const Sweep& sweep = *state.out.sweep;
  const auto& axes = sweep.axes;
  if (axes.empty()) return;
  std::vector<std::vector<size_t>> combos;  // [combination][axis] value index
  if (sweep.mode == "zip") {
    for (const auto& a : axes) {
      if (a.values.size() != axes.front().values.size()) {
        state.errors.push_back(fmt::format(
            "{}: sweep.{}.{}: {} values, but sweep.{}.{} has {}; mode = \"zip\" takes the lists "
            "in lockstep, so give them the same length (or use mode = \"grid\")",
            a.loc.format(), a.section, a.key, a.values.size(), axes.front().section,
            axes.front().key, axes.front().values.size()));
        return;
      }
    }
    for (size_t i = 0; i < axes.front().values.size(); ++i) {
      combos.emplace_back(axes.size(), i);
    }
  } else {
    combos.emplace_back();
    for (const auto& a : axes) {
      std::vector<std::vector<size_t>> next;
      for (const auto& c : combos) {
        for (size_t i = 0; i < a.values.size(); ++i) {
          next.push_back(c);
          next.back().push_back(i);
        }
      }
      combos = std::move(next);
    }
  }
  auto label = [&](size_t axis) {
    for (size_t j = 0; j < axes.size(); ++j) {
      if (j != axis && axes[j].key == axes[axis].key) {
        return axes[axis].section + "." + axes[axis].key;
      }
    }
    return axes[axis].key;
  };
  std::vector<VariantData> written = std::move(state.out.variants);
  const bool alone = written.empty();
  if (alone) {
    VariantData base;
    base.loc = sweep.loc;
    written.push_back(base);
  }
  std::vector<VariantData> generated;
  for (const auto& w : written) {
    for (const auto& c : combos) {
      VariantData v = w;
      std::vector<std::string> parts;
      if (!alone) parts.push_back(w.name);
      for (size_t a = 0; a < axes.size(); ++a) {
        const Setting& value = axes[a].values[c[a]];
        Setting setting = value;
        setting.loc = axes[a].loc;  // unknown keys point at the key, bad values at the value
        v.sections[axes[a].section].keys[axes[a].key] = setting;
        v.sections[axes[a].section].present = true;
        parts.push_back(label(a) + "=" + name_value(value));
      }
      v.name = fmt::format("{}", fmt::join(parts, ","));
      if (auto problem = path_component_problem(v.name)) {
        state.errors.push_back(
            fmt::format("{}: sweep: the generated variant name {}", sweep.loc.format(), *problem));
      }
      generated.push_back(std::move(v));
    }
  }
  state.out.variants = std::move(generated);
}

// Reads one top-level key: a section table, the [[variant]] array, [sweep] or [compare].
void read_top_level(const std::string& key, const toml::node& node, ParseState& state) {
  const Location loc = location_of(node, state.origin);
  const auto& sections = known_sections();
  if (std::find(sections.begin(), sections.end(), key) != sections.end()) {
    if (auto table = node.as_table()) {
      state.out.base[key] = read_section(*table, state.origin);
      if (key == "experiment") read_seeds(*table, state);
    } else {
      state.errors.push_back(fmt::format("{}: {}: must be a table [{}]", loc.format(), key, key));
    }
  } else if (key == "variant") {
    auto array = node.as_array();
    if (array == nullptr || !array->is_array_of_tables()) {
      state.errors.push_back(fmt::format(
          "{}: variant: must be an array of tables, written [[variant]]", loc.format()));
      return;
    }
    for (size_t i = 0; i < array->size(); ++i) read_variant(*array->get(i)->as_table(), i, state);
  } else if (key == "sweep") {
    if (auto table = node.as_table()) {
      read_sweep(*table, state);
    } else {
      state.errors.push_back(fmt::format("{}: sweep: must be a table [sweep]", loc.format()));
    }
  } else if (key == "compare") {
    if (auto table = node.as_table()) {
      read_compare(*table, state);
    } else {
      state.errors.push_back(fmt::format("{}: compare: must be a table [compare]", loc.format()));
    }
  } else {
    state.errors.push_back(unknown_top_level(key, node, loc));
  }
}

// Every variant name once.
void check_duplicate_names(ParseState& state) {
  const auto& variants = state.out.variants;
  for (size_t i = 0; i < variants.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (!variants[i].name.empty() && variants[i].name == variants[j].name) {
        state.errors.push_back(
            fmt::format("{}: variant.name: duplicate variant name '{}' (first at {})",
                        variants[i].loc.format(), variants[i].name, variants[j].loc.format()));
      }
    }
  }
}

}  // namespace

ExperimentFile parse_experiment_file(const fs::path& path) {
  ParseState state{path.string(), {}, {}};
  const toml::table root = parse_toml(path, state.origin);
  state.out.path = path;
  state.out.base_dir = fs::absolute(path).parent_path();
  for (const auto& [key_node, node] : root) {
    read_top_level(std::string(key_node.str()), node, state);
  }
  for (const auto& section : known_sections()) {
    auto& data = state.out.base[section];
    if (!data.present) data.loc = Location{state.origin, 0, 0, false};
  }
  if (state.out.sweep && state.errors.empty()) generate_sweep_variants(state);
  check_duplicate_names(state);
  if (!state.errors.empty()) throw ConfigError(state.errors);
  return std::move(state.out);
}

SetOverride parse_set_argument(const std::string& argument) {
  const size_t eq = argument.find('=');
  const Location loc{argument, 0, 0, true};
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(
        fmt::format("{}: expected SECTION.KEY=VALUE, e.g. "
                    "optimizer.learning_rate=1e-4",
                    loc.format()));
  }
  const std::string path = argument.substr(0, eq);
  const std::string text = argument.substr(eq + 1);
  const size_t dot = path.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == path.size() ||
      path.find('.', dot + 1) != std::string::npos) {
    throw ConfigError(fmt::format("{}: {}: expected SECTION.KEY, e.g. train.train_batch_size",
                                  loc.format(), path));
  }
  SetOverride out;
  out.argument = argument;
  out.section = path.substr(0, dot);
  out.key = path.substr(dot + 1);
  const auto& sections = known_sections();
  if (std::find(sections.begin(), sections.end(), out.section) == sections.end()) {
    auto close = closest_match(out.section, sections);
    throw ConfigError(fmt::format("{}: {}: unknown section '{}'{}", loc.format(), path, out.section,
                                  close ? fmt::format("; did you mean '{}'?", *close) : ""));
  }
  // The value is TOML when it parses as one (1e-4, true, "x"); otherwise a bare string.
  try {
    toml::table t = toml::parse("v = " + text);
    out.setting = to_setting(*t.get("v"), loc);
  } catch (const toml::parse_error&) {
    out.setting.value = text;
    out.setting.toml_type = "string";
  }
  out.setting.loc = loc;
  out.setting.value_loc = loc;
  return out;
}

}  // namespace bertlab
