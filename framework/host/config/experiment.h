#pragma once
// Experiment files: parsing, variants (deep merge), --set overrides, and validation of every key
// against the host's and the plugins' option declarations, before any work starts.

#include "runtime/registry.h"

#include <bertlab/config.h>
#include <bertlab/model/bert_config.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bertlab {

/// Where a setting came from: a position in a file, or a --set argument.
struct Location {
  std::string origin;     ///< the file as the user named it, or the --set argument
  int64_t line = 0;       ///< 1-based; 0 when unknown
  int64_t column = 0;     ///< 1-based
  bool from_set = false;  ///< origin is a --set argument

  /// `FILE:LINE:COL` or `--set 'ARG'`.
  std::string format() const;
};

/// One scalar key of a section as written.
struct Setting {
  std::optional<OptionValue> value;  ///< nullopt when the TOML value is not a scalar
  std::string toml_type;             ///< "integer", "float", "string", "boolean", "table", ...
  Location loc;                      ///< where the key is written
  Location value_loc;                ///< where the value is written
};

struct SectionData {
  Location loc;  ///< the section header (or the file when absent)
  std::map<std::string, Setting> keys;
  bool present = false;  ///< the file has the section
};

struct VariantData {
  std::string name;
  Location loc;
  std::map<std::string, SectionData> sections;  ///< overrides only
  std::map<std::string, Setting> expectation;   ///< expect, rtol, atol (for gradcheck)
};

/// One axis of a [sweep]: `[sweep.SECTION] KEY = [v1, v2, ...]`.
struct SweepAxis {
  std::string section;
  std::string key;
  std::vector<Setting> values;  ///< each with its own position in the list
  Location loc;                 ///< the key
};

/// A [sweep] table: variants generated from lists of values.
struct Sweep {
  std::string mode = "grid";  ///< "grid": every combination; "zip": the lists in lockstep
  int64_t max_runs = 256;     ///< more runs (variants × seeds) is an error
  std::vector<SweepAxis> axes;
  Location loc;  ///< the [sweep] header
};

/// A parsed experiment file, before merging and validation.
struct ExperimentFile {
  std::filesystem::path path;      ///< as the user named it
  std::filesystem::path base_dir;  ///< absolute folder of the file: paths resolve against it
  std::map<std::string, SectionData> base;
  /// The [[variant]]s as written, then (with a [sweep]) replaced by the generated ones: each
  /// combination of the sweep's values, or each written variant with each combination.
  std::vector<VariantData> variants;
  std::optional<Sweep> sweep;
  std::optional<Setting> reference;  ///< [compare] reference
  /// [experiment] seeds = [...]: every variant runs once per seed (empty: not written).
  std::vector<int64_t> seeds;
  Location seeds_loc;  ///< where `seeds` is written
};

/// `section.key=value` from the command line; value parsed as TOML, else taken as a string.
struct SetOverride {
  std::string argument;
  std::string section;
  std::string key;
  Setting setting;
};

/// One component choice of a variant, validated.
struct ResolvedComponent {
  std::string plugin;
  const Component* component = nullptr;
  ConfigView options;  ///< the plugin's declared options (host keys removed)
};

/// `[model] init_from = "VARIANT"`: the run starts from another variant's final weights.
struct InitFrom {
  std::string variant;               ///< the variant it starts from
  std::optional<int64_t> seed;       ///< that variant's run: the same seed's, or its only run
  std::filesystem::path run_folder;  ///< that run's folder under the experiment's
  std::filesystem::path checkpoint;  ///< its model.safetensors, also [model] init_checkpoint
  std::string config_hash;           ///< run_config_hash() of that run
  /// "variant" or "variant seed S".
  std::string label() const;
};

struct ResolvedVariant {
  std::string name;
  ConfigView experiment;     ///< [experiment]
  ConfigView model;          ///< [model] host keys (bert_config fields folded into bert_config)
  ConfigView train;          ///< [train]
  ConfigView strategy_host;  ///< [strategy] keys the host owns: device, replicas, launcher, ...
  BertConfig bert_config;
  ResolvedComponent task;
  ResolvedComponent strategy;
  ResolvedComponent optimizer;
  /// [adversarial]: plugin "" and no component for plain training (plugin = "none").
  ResolvedComponent adversarial;
  std::string resolved_toml;  ///< the exact configuration, every key with its effective value
  /// Set when the experiment runs several seeds ([experiment] seeds or repeats): this run's
  /// seed, which is also its [experiment] seed; its folder is VARIANT/seed-<seed>.
  std::optional<int64_t> repeat_seed;
  /// The run's folder under the experiment's: VARIANT, or VARIANT/seed-<seed>.
  std::filesystem::path run_folder() const;
  /// What `bertlab gradcheck` expects of this variant against the reference.
  std::string expect = "match";  ///< "match" or "differ"
  double rtol = 1e-5;            ///< relative tolerance of a match
  double atol = 1e-6;            ///< absolute tolerance of a match
  /// Set when [model] init_from names a variant; its [model] init_checkpoint is then that run's
  /// final weights (and init_from reads "" in `model` and resolved_toml, which say so).
  std::optional<InitFrom> init_from;
  Location init_from_loc;  ///< where init_from is written
  int stage = 0;           ///< 0: starts from no variant; else 1 + the stage it starts from
};

struct ResolvedExperiment {
  std::string name;
  std::filesystem::path file;
  std::filesystem::path output_dir;  ///< runs/<experiment name>/ parent: [experiment] output_dir
  /// The selected ones, stage by stage (a run after those it starts from) and in file order
  /// within a stage; with several seeds each variant once per seed, its runs next to each other
  /// in seed order.
  std::vector<ResolvedVariant> variants;
  /// Runs that selected ones start from (init_from) but --variant left out: not run here, their
  /// final weights must be there when a run starting from them starts.
  std::vector<ResolvedVariant> dependencies;
  std::vector<int64_t> seeds;  ///< the seeds every variant runs with (one: as [experiment] seed)
  std::vector<std::string> all_variant_names;
  std::string reference;  ///< [compare] reference, or the first variant
};

/// What makes `name` unfit to be one folder under runs/ (an experiment's or a variant's name), or
/// nothing: it must be letters, digits and `.` `_` `-` `=` `,` `+`, not empty, not `.` or `..`.
std::optional<std::string> path_component_problem(const std::string& name);

/// The sections an experiment file may have.
const std::vector<std::string>& known_sections();

/// Parses the file. Throws ConfigError (every problem found) on a syntax or structure error.
ExperimentFile parse_experiment_file(const std::filesystem::path& path);

/// Parses one `--set section.key=value` argument. Throws ConfigError.
SetOverride parse_set_argument(const std::string& argument);

struct ResolveOptions {
  std::vector<SetOverride> overrides;
  std::vector<std::string> selected_variants;       ///< empty: all
  std::optional<std::filesystem::path> output_dir;  ///< --output-dir
};

/// The configuration hash that run_summary.json records and a later run compares: config_hash()
/// of its resolved_toml, with that of the run it starts from (init_from), so that a run reruns
/// when the weights it starts from were made by another configuration.
std::string run_config_hash(const ResolvedVariant& variant);

/// Links the runs that start from other variants (init_from) to those variants' runs: checks the
/// names (unknown, itself, a cycle, with init_checkpoint), sets each one's init_from, stage,
/// [model] init_checkpoint and, with `retoml`, its resolved_toml; orders out.variants stage by
/// stage. Throws ConfigError listing every problem.
void link_stages(ResolvedExperiment& out,
                 const std::function<std::string(const ResolvedVariant&)>& retoml);

/// Merges and validates every selected variant. Throws ConfigError listing every problem.
ResolvedExperiment resolve_experiment(const ExperimentFile& file, const ComponentRegistry& registry,
                                      const ResolveOptions& options);

}  // namespace bertlab
