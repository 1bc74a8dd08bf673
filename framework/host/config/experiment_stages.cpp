// Studies in stages: `[model] init_from = "VARIANT"` starts a run from the final weights of
// another variant's run of the same experiment. The names are checked (unknown, itself, a
// cycle), each run is linked to the run it starts from (the same seed's, or the only one), and
// the runs are ordered stage by stage so that a run comes after those it starts from.

#include <bertlab/error.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "config/experiment.h"
#include "report/run_outputs.h"

namespace bertlab {

namespace fs = std::filesystem;

namespace {

std::string init_from_name(const ResolvedVariant& v) { return v.model.get_string("init_from"); }

/// Each variant's first run (selected or a dependency), by name.
std::map<std::string, const ResolvedVariant*> first_runs(const ResolvedExperiment& out) {
  std::map<std::string, const ResolvedVariant*> runs;
  for (const auto* list : {&out.variants, &out.dependencies}) {
    for (const auto& v : *list) runs.emplace(v.name, &v);
  }
  return runs;
}

/// The problems of one variant's init_from by itself: an unknown name, itself, both keys set.
void check_names(const ResolvedExperiment& out, const ResolvedVariant& v,
                 std::vector<std::string>& errors) {
  const std::string dep = init_from_name(v);
  const std::string where = fmt::format("{}: model.init_from", v.init_from_loc.format());
  const auto& names = out.all_variant_names;
  if (dep == v.name) {
    errors.push_back(fmt::format(
        "{}: variant '{}' starts from itself; name the variant whose final weights it starts "
        "from, or remove init_from",
        where, v.name));
  } else if (std::find(names.begin(), names.end(), dep) == names.end()) {
    const auto close = closest_match(dep, names);
    errors.push_back(fmt::format(
        "{}: variant '{}' starts from '{}', and there is no such variant "
        "in {}{}; variants: {}",
        where, v.name, dep, out.file.string(),
        close ? fmt::format("; did you mean '{}'?", *close) : "", fmt::join(names, ", ")));
  }
  if (!v.model.get_path("init_checkpoint").empty()) {
    errors.push_back(fmt::format(
        "{}: variant '{}' sets both init_from = '{}' and init_checkpoint = '{}'; keep one (the "
        "weights it starts from)",
        where, v.name, dep, v.model.get_path("init_checkpoint").string()));
  }
}

/// Stage of each named variant (0: starts from none), or a cycle's error.
std::map<std::string, int> stages_of(const std::map<std::string, const ResolvedVariant*>& runs,
                                     std::vector<std::string>& errors) {
  std::map<std::string, int> stage;
  for (const auto& [start, run] : runs) {
    std::vector<std::string> path;
    std::string name = start;
    // Walks init_from until a known stage, no dependency, or a name already on the path.
    while (stage.count(name) == 0) {
      auto it = runs.find(name);
      const std::string dep = it == runs.end() ? "" : init_from_name(*it->second);
      if (std::find(path.begin(), path.end(), name) != path.end()) {
        path.push_back(name);
        errors.push_back(fmt::format(
            "{}: model.init_from: the variants start from each other in a cycle, {}; one of "
            "them must start from random weights or a checkpoint",
            runs.at(start)->init_from_loc.format(), fmt::join(path, " -> ")));
        for (const auto& n : path) stage[n] = 0;
        break;
      }
      path.push_back(name);
      if (dep.empty() || runs.count(dep) == 0 || dep == name) {
        stage[name] = 0;
        break;
      }
      name = dep;
    }
    // Unwinds the path: each one more than the one it starts from.
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      if (stage.count(*it) != 0) continue;
      stage[*it] = 1 + stage[init_from_name(*runs.at(*it))];
    }
  }
  return stage;
}

/// The run of `dep` that `v` starts from: the same seed's, or the only one.
const ResolvedVariant* dependency_run(const ResolvedExperiment& out, const ResolvedVariant& v,
                                      const std::string& dep, std::vector<std::string>& errors) {
  std::vector<const ResolvedVariant*> candidates;
  for (const auto* list : {&out.variants, &out.dependencies}) {
    for (const auto& d : *list) {
      if (d.name == dep) candidates.push_back(&d);
    }
  }
  for (const auto* d : candidates) {
    if (d->repeat_seed == v.repeat_seed) return d;
  }
  if (candidates.size() == 1) return candidates.front();
  errors.push_back(fmt::format(
      "{}: model.init_from: variant '{}' runs with seed {} and '{}' has no run of that seed; "
      "give both the same seeds",
      v.init_from_loc.format(), v.name, v.repeat_seed.value_or(-1), dep));
  return nullptr;
}

/// Points `v` at `dep`'s final weights: [model] init_checkpoint set, init_from cleared.
void link(const ResolvedExperiment& out, const ResolvedVariant& dep, ResolvedVariant& v) {
  InitFrom from;
  from.variant = dep.name;
  from.seed = dep.repeat_seed;
  from.run_folder = dep.run_folder();
  from.checkpoint = out.output_dir / out.name / from.run_folder / "model.safetensors";
  from.config_hash = run_config_hash(dep);
  std::map<std::string, OptionValue> values = v.model.values();
  values["init_checkpoint"] = from.checkpoint.string();
  values["init_from"] = std::string();
  v.model = ConfigView("model", v.model.declarations(), std::move(values));
  v.init_from = std::move(from);
}

}  // namespace

std::string InitFrom::label() const {
  return seed ? fmt::format("{} seed {}", variant, *seed) : variant;
}

std::string run_config_hash(const ResolvedVariant& variant) {
  if (!variant.init_from) return config_hash(variant.resolved_toml);
  return config_hash(fmt::format("{}init_from_config_hash = \"{}\"\n", variant.resolved_toml,
                                 variant.init_from->config_hash));
}

void link_stages(ResolvedExperiment& out,
                 const std::function<std::string(const ResolvedVariant&)>& retoml) {
  std::vector<std::string> errors;
  std::set<std::string> checked;  // every seed's run of a variant says the same
  for (const auto* list : {&out.variants, &out.dependencies}) {
    for (const auto& v : *list) {
      if (!init_from_name(v).empty() && checked.insert(v.name).second) {
        check_names(out, v, errors);
      }
    }
  }
  if (checked.empty()) return;
  if (!errors.empty()) throw ConfigError(errors);
  const std::map<std::string, int> stage = stages_of(first_runs(out), errors);
  if (!errors.empty()) throw ConfigError(errors);
  int last = 0;
  for (const auto& [name, s] : stage) last = std::max(last, s);
  // Stage by stage, so that the run a run starts from has its final configuration hash.
  for (int s = 1; s <= last; ++s) {
    for (auto* list : {&out.dependencies, &out.variants}) {
      for (auto& v : *list) {
        if (stage.at(v.name) != s) continue;
        const std::string dep = init_from_name(v);
        const ResolvedVariant* run = dependency_run(out, v, dep, errors);
        if (run == nullptr) continue;
        link(out, *run, v);
        v.stage = s;
        v.resolved_toml = retoml(v);
      }
    }
  }
  if (!errors.empty()) throw ConfigError(errors);
  std::stable_sort(
      out.variants.begin(), out.variants.end(),
      [](const ResolvedVariant& a, const ResolvedVariant& b) { return a.stage < b.stage; });
}

}  // namespace bertlab
