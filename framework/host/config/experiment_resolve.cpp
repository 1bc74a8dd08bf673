// Merging variants over the base, applying --set, and validating every key of every selected
// variant against the host's and the plugins' declarations. Every problem is collected.

#include <bertlab/error.h>
#include <bertlab/io/checkpoint.h>

#include <ATen/Context.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "comm/nccl_communicator.h"
#include "config/experiment.h"
#include "config/host_options.h"

namespace bertlab {

namespace fs = std::filesystem;

namespace {

using Sections = std::map<std::string, SectionData>;

/// Collects messages; identical lines (a base-file problem seen by every variant) once.
class Diagnostics {
 public:
  explicit Diagnostics(std::string variant) : variant_(std::move(variant)) {}
  void add(const Location& loc, const std::string& section, const std::string& key,
           const std::string& message) {
    std::string name = key.empty() ? section : section + "." + key;
    lines_.push_back(fmt::format("{}: {}: {}", loc.format(), name, message));
  }
  const std::vector<std::string>& lines() const { return lines_; }
  const std::string& variant() const { return variant_; }

 private:
  std::string variant_;
  std::vector<std::string> lines_;
};

Sections merge_variant(const ExperimentFile& file, const VariantData* variant,
                       const std::vector<SetOverride>& overrides) {
  Sections merged = file.base;
  if (variant != nullptr) {
    for (const auto& [section, data] : variant->sections) {
      auto& target = merged[section];
      if (!target.present) {
        target.loc = data.loc;
        target.present = true;
      }
      for (const auto& [key, setting] : data.keys) target.keys[key] = setting;
    }
  }
  for (const auto& o : overrides) merged[o.section].keys[o.key] = o.setting;
  return merged;
}

std::optional<OptionValue> convert(const OptionDecl& decl, const Setting& setting) {
  if (!setting.value) return std::nullopt;
  const OptionValue& v = *setting.value;
  switch (decl.type) {
    case OptionType::kBool:
      if (std::holds_alternative<bool>(v)) return v;
      break;
    case OptionType::kInt:
      if (std::holds_alternative<int64_t>(v)) return v;
      break;
    case OptionType::kFloat:
      if (std::holds_alternative<double>(v)) return v;
      if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
      break;
    case OptionType::kString:
    case OptionType::kPath:
      if (std::holds_alternative<std::string>(v)) return v;
      break;
  }
  return std::nullopt;
}

const char* type_phrase(OptionType type) {
  switch (type) {
    case OptionType::kBool:
      return "a boolean (true or false)";
    case OptionType::kInt:
      return "an integer";
    case OptionType::kFloat:
      return "a number";
    case OptionType::kString:
      return "a string";
    case OptionType::kPath:
      return "a path (string)";
  }
  return "?";
}

std::string value_phrase(const Setting& s) {
  if (s.value) return fmt::format("{} {}", s.toml_type, format_value(*s.value));
  return s.toml_type;
}

/// Every host-owned key, by section, to tell a user which section a misplaced key belongs to.
std::map<std::string, std::vector<std::string>> host_keys_by_section() {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& d : experiment_options()) out["experiment"].push_back(d.key);
  for (const auto& d : model_options()) out["model"].push_back(d.key);
  for (const auto& d : BertConfig::field_options()) out["model"].push_back(d.key);
  for (const auto& d : train_options()) out["train"].push_back(d.key);
  for (const auto& d : strategy_host_options()) out["strategy"].push_back(d.key);
  return out;
}

struct SectionCheck {
  std::string section;
  const SectionData* data = nullptr;
  std::vector<OptionDecl> decls;
  std::string owner;  ///< "the host" or "optimizer 'adam_weight_decay'", for unknown-key messages
  fs::path base_dir;
};

/// Validates one section; returns the converted values of the keys that are set.
std::map<std::string, OptionValue> validate_section(const SectionCheck& check, Diagnostics& diag) {
  std::map<std::string, OptionValue> values;
  const auto& decls = check.decls;
  std::vector<std::string> known;
  known.reserve(decls.size());
  for (const auto& d : decls) known.push_back(d.key);
  for (const auto& item : check.data->keys) {
    const std::string& key = item.first;
    const Setting& setting = item.second;
    auto decl =
        std::find_if(decls.begin(), decls.end(), [&](const OptionDecl& d) { return d.key == key; });
    if (decl == decls.end()) {
      std::string hint;
      if (auto close = closest_match(key, known)) {
        hint = fmt::format("; did you mean '{}'?", *close);
      } else {
        for (const auto& [other, keys] : host_keys_by_section()) {
          if (other != check.section && std::find(keys.begin(), keys.end(), key) != keys.end()) {
            hint = fmt::format("; '{}' belongs in [{}]", key, other);
            break;
          }
        }
      }
      if (hint.empty()) {
        hint = fmt::format("; see `bertlab plugins --describe` for the keys of {}", check.owner);
      }
      diag.add(setting.loc, check.section, key,
               fmt::format("unknown key for {}{}", check.owner, hint));
      continue;
    }
    auto value = convert(*decl, setting);
    if (!value) {
      diag.add(setting.value_loc, check.section, key,
               fmt::format("must be {}, got {}", type_phrase(decl->type), value_phrase(setting)));
      continue;
    }
    if (auto problem = check_value(*decl, *value)) {
      diag.add(setting.value_loc, check.section, key, *problem);
      continue;
    }
    if (decl->type == OptionType::kPath) {
      const auto& text = std::get<std::string>(*value);
      if (!text.empty()) {
        // Paths in the file resolve against its folder; --set paths against the current one.
        fs::path base = setting.loc.from_set ? fs::current_path() : check.base_dir;
        fs::path resolved = (base / text).lexically_normal();
        std::error_code ec;
        if (decl->path_is_checkpoint) {
          try {
            locate_checkpoint(resolved);
          } catch (const DataError& e) {
            diag.add(setting.value_loc, check.section, key, e.what());
            continue;
          }
          values[key] = resolved.string();
          continue;
        }
        bool ok = decl->path_is_directory ? fs::is_directory(resolved, ec)
                                          : fs::is_regular_file(resolved, ec);
        if (!ok) {
          diag.add(setting.value_loc, check.section, key,
                   fmt::format("{} not found: {}", decl->path_is_directory ? "folder" : "file",
                               resolved.string()));
          continue;
        }
        value = resolved.string();
      }
    }
    values[key] = *value;
  }
  for (const auto& d : decls) {
    if (d.required && check.data->keys.count(d.key) == 0) {
      diag.add(check.data->loc, check.section, d.key,
               fmt::format("missing required key ({}); add it to [{}]", d.doc, check.section));
    }
  }
  return values;
}

/// Splits `values` into the keys declared in `host` and the rest.
std::map<std::string, OptionValue> take_keys(std::map<std::string, OptionValue>& values,
                                             const std::vector<OptionDecl>& host) {
  std::map<std::string, OptionValue> taken;
  for (const auto& d : host) {
    auto it = values.find(d.key);
    if (it != values.end()) {
      taken.insert(*it);
      values.erase(it);
    }
  }
  return taken;
}

std::vector<OptionDecl> concat(std::vector<OptionDecl> a, const std::vector<OptionDecl>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Resolves [task], [strategy] or [optimizer]: finds the plugin, validates host and plugin keys.
ResolvedComponent resolve_component(ComponentKind kind, const std::string& section,
                                    const Sections& merged, const ComponentRegistry& registry,
                                    const std::vector<OptionDecl>& host_decls,
                                    const fs::path& base_dir, ConfigView* host_view,
                                    Diagnostics& diag) {
  ResolvedComponent out;
  const SectionData& data = merged.at(section);
  auto plugin_it = data.keys.find("plugin");
  if (plugin_it == data.keys.end()) {
    auto names = registry.names(kind);
    diag.add(data.loc, section, "plugin",
             fmt::format("missing required key: the {} plugin to use (one of: {})", to_string(kind),
                         fmt::join(names, ", ")));
    return out;
  }
  const Setting& plugin = plugin_it->second;
  if (!plugin.value || !std::holds_alternative<std::string>(*plugin.value)) {
    diag.add(plugin.value_loc, section, "plugin",
             fmt::format("must be a string naming a {} plugin, got {}", to_string(kind),
                         value_phrase(plugin)));
    return out;
  }
  out.plugin = std::get<std::string>(*plugin.value);
  out.component = registry.find(kind, out.plugin);
  if (out.component == nullptr) {
    auto names = registry.names(kind);
    auto close = closest_match(out.plugin, names);
    diag.add(plugin.value_loc, section, "plugin",
             fmt::format("unknown {} plugin '{}'{}; known {} plugins: {} (add a folder with "
                         "--plugin-dir or BERTLAB_PLUGIN_PATH for others)",
                         to_string(kind), out.plugin,
                         close ? fmt::format("; did you mean '{}'?", *close) : "", to_string(kind),
                         names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    return out;
  }
  SectionCheck check{section, &data, concat(host_decls, out.component->spec.options),
                     fmt::format("{} '{}'", to_string(kind), out.plugin), base_dir};
  auto values = validate_section(check, diag);
  auto host_values = take_keys(values, host_decls);
  if (host_view != nullptr) *host_view = ConfigView(section, host_decls, host_values);
  out.options = ConfigView(section, out.component->spec.options, values);
  return out;
}

/// `key = value` lines for every declared key (set or default), host keys first.
void append_section_toml(std::string& out, const std::string& section,
                         const std::vector<const ConfigView*>& views, const std::string& plugin) {
  out += fmt::format("\n[{}]\n", section);
  if (!plugin.empty()) out += fmt::format("plugin = {}\n", format_value(plugin));
  for (const ConfigView* view : views) {
    for (const auto& d : view->declarations()) {
      if (d.key == "plugin") continue;
      auto it = view->values().find(d.key);
      if (it != view->values().end()) {
        out += fmt::format("{} = {}\n", d.key, format_value(it->second));
      } else if (d.default_value) {
        out += fmt::format("{} = {}  # default\n", d.key, format_value(*d.default_value));
      }
    }
  }
}

void append_bert_config_toml(std::string& out, const BertConfig& c) {
  out += fmt::format(
      "# bert_config (after [model] overrides)\nvocab_size = {}\nhidden_size = {}\n"
      "num_hidden_layers = {}\nnum_attention_heads = {}\nintermediate_size = {}\n"
      "hidden_act = {}\nhidden_dropout_prob = {}\nattention_probs_dropout_prob = {}\n"
      "max_position_embeddings = {}\ntype_vocab_size = {}\ninitializer_range = {}\n",
      c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size,
      format_value(c.hidden_act), format_value(c.hidden_dropout_prob),
      format_value(c.attention_probs_dropout_prob), c.max_position_embeddings, c.type_vocab_size,
      format_value(c.initializer_range));
}

Location key_location(const SectionData& data, const std::string& key) {
  auto it = data.keys.find(key);
  return it != data.keys.end() ? it->second.loc : data.loc;
}

/// Token ids index the word-embedding table: a vocabulary larger than vocab_size would read
/// past it.
void check_vocab_size(const SectionData& model, const fs::path& vocab_file,
                      const BertConfig& config, Diagnostics& diag) {
  std::ifstream in(vocab_file, std::ios::binary);
  int64_t lines = 0;
  std::string line;
  while (std::getline(in, line)) ++lines;
  if (lines > config.vocab_size) {
    diag.add(key_location(model, "vocab_file"), "model", "vocab_file",
             fmt::format("{} has {} tokens but bert_config vocab_size is {}; token ids would fall "
                         "outside the embedding table (use the matching vocab, or set "
                         "vocab_size = {} in [model])",
                         vocab_file.string(), lines, config.vocab_size, lines));
  }
}

/// The device: what this build can run on.
void check_strategy_host(const SectionData& data, const ConfigView& host, Diagnostics& diag) {
  const std::string device = host.get_string("device");
  try {
    c10::Device parsed(device);
    if (parsed.is_cuda() && !at::hasCUDA()) {
      diag.add(key_location(data, "device"), "strategy", "device",
               fmt::format("'{}' needs a libtorch built with CUDA; this one is CPU-only (use "
                           "device = \"cpu\")",
                           device));
    } else if (!parsed.is_cpu() && !parsed.is_cuda()) {
      diag.add(key_location(data, "device"), "strategy", "device",
               fmt::format("'{}' is not supported; use \"cpu\" or \"cuda:N\"", device));
    }
  } catch (const c10::Error&) {
    diag.add(key_location(data, "device"), "strategy", "device",
             fmt::format("'{}' is not a device; use \"cpu\" or \"cuda:N\"", device));
    return;
  }
  if (host.get_string("backend") != "nccl") return;
  // NCCL: one CUDA device per rank, so ranks must be processes (thread ranks share a device).
  const bool cuda = device.rfind("cuda", 0) == 0;
  if (!cuda || host.get_string("launcher") != "env") {
    diag.add(key_location(data, "backend"), "strategy", "backend",
             fmt::format("'nccl' needs CUDA ranks that are processes (device = \"cuda\", "
                         "launcher = \"env\"); this variant has device = \"{}\", launcher = "
                         "\"{}\" (use backend = \"auto\" or \"gloo\")",
                         device, host.get_string("launcher")));
  } else if (!nccl_available()) {
    diag.add(key_location(data, "backend"), "strategy", "backend",
             "'nccl' needs a bertlab built against a CUDA libtorch, on a machine with a GPU; "
             "this one has none (use backend = \"gloo\")");
  }
}

/// fp16 autocast is CUDA's (libtorch's CPU autocast runs bf16).
void check_precision(const Sections& merged, const ResolvedVariant& out, Diagnostics& diag) {
  if (out.train.get_string("precision") != "fp16") return;
  const std::string device = out.strategy_host.get_string("device");
  if (device.rfind("cuda", 0) == 0) return;
  const auto& train = merged.at("train");
  const Location loc = train.keys.count("precision") ? train.keys.at("precision").loc : train.loc;
  diag.add(loc, "train", "precision",
           fmt::format("'fp16' needs a CUDA device, and [strategy] device is \"{}\"; use "
                       "precision = \"bf16\" on CPU",
                       device));
}

/// [train] stop_when: its form, and the evaluations during training it needs.
void check_stop_when(const Sections& merged, const ResolvedVariant& out, Diagnostics& diag) {
  const std::string text = out.train.get_string("stop_when");
  if (text.empty()) return;
  const auto& train = merged.at("train");
  const Location loc = train.keys.count("stop_when") ? train.keys.at("stop_when").loc : train.loc;
  std::string problem;
  if (!parse_stop_when(text, &problem)) {
    diag.add(loc, "train", "stop_when", problem);
  } else if (out.train.get_int("eval_every_steps") == 0) {
    diag.add(loc, "train", "stop_when",
             fmt::format("'{}' is checked at the evaluations during training, and "
                         "eval_every_steps is 0 (none); set eval_every_steps = N",
                         text));
  }
}

// What resolving one variant's sections reads, and where its problems go.
struct VariantScope {
  const Sections& merged;    // the base, the variant's overrides and --set, merged
  const fs::path& base_dir;  // the experiment file's folder: its relative paths resolve here
  Diagnostics& diag;
};

// Validates [model] and reads bert_config_file, with [model]'s bert_config fields applied.
void resolve_model(const VariantScope& scope, ResolvedVariant& out) {
  // [model]: host keys plus any bert_config field as an override of the file's value.
  const auto field_decls = BertConfig::field_options();
  auto model_values =
      validate_section({"model", &scope.merged.at("model"), concat(model_options(), field_decls),
                        "[model]", scope.base_dir},
                       scope.diag);
  auto field_values = model_values;
  model_values = take_keys(field_values, model_options());
  out.model = ConfigView("model", model_options(), model_values);
  out.init_from_loc = key_location(scope.merged.at("model"), "init_from");
  if (model_values.count("bert_config_file")) {
    const auto& model = scope.merged.at("model");
    const Location& loc = model.keys.at("bert_config_file").loc;
    try {
      out.bert_config = BertConfig::from_json_file(out.model.get_path("bert_config_file"));
      for (const auto& [key, value] : field_values) out.bert_config.set_field(key, value);
      out.bert_config.validate();
    } catch (const Error& e) {
      scope.diag.add(loc, "model", "bert_config_file", e.what());
    }
  }
  if (model_values.count("vocab_file") && scope.diag.lines().empty()) {
    check_vocab_size(scope.merged.at("model"), out.model.get_path("vocab_file"), out.bert_config,
                     scope.diag);
  }
}

// train_batch_size must divide evenly over the replicas.
void check_batch_split(const Sections& merged, const ResolvedVariant& out, Diagnostics& diag) {
  const int64_t replicas = out.strategy_host.get_int("replicas");
  const int64_t batch = out.train.get_int("train_batch_size");
  if (batch % replicas != 0) {
    diag.add(key_location(merged.at("train"), "train_batch_size"), "train", "train_batch_size",
             fmt::format("{} does not divide evenly over {} replicas; use a multiple of {}", batch,
                         replicas, replicas));
  }
}

// [adversarial]: none by default; its other keys only with a plugin.
void resolve_adversarial(const VariantScope& scope, const ComponentRegistry& registry,
                         ResolvedVariant& out) {
  const auto section = scope.merged.find("adversarial");
  if (section == scope.merged.end()) return;
  const SectionData& data = section->second;
  const auto plugin = data.keys.find("plugin");
  const bool none =
      plugin == data.keys.end() ||
      (plugin->second.value && std::holds_alternative<std::string>(*plugin->second.value) &&
       std::get<std::string>(*plugin->second.value) == "none");
  if (!none) {
    out.adversarial =
        resolve_component(ComponentKind::kAdversarial, "adversarial", scope.merged, registry,
                          {adversarial_plugin_option()}, scope.base_dir, nullptr, scope.diag);
    return;
  }
  for (const auto& [key, setting] : data.keys) {
    if (key == "plugin") continue;
    scope.diag.add(setting.loc, "adversarial", key,
                   fmt::format("is read only by an adversarial plugin, and plugin is \"none\"; set "
                               "plugin to one of: {}, or remove the key",
                               fmt::join(registry.names(ComponentKind::kAdversarial), ", ")));
  }
}

// Resolves [task], [strategy] and [optimizer], then checks the strategy's host keys.
void resolve_components(const VariantScope& scope, const ComponentRegistry& registry,
                        ResolvedVariant& out) {
  out.task = resolve_component(ComponentKind::kTask, "task", scope.merged, registry,
                               {plugin_option("task")}, scope.base_dir, nullptr, scope.diag);
  out.strategy =
      resolve_component(ComponentKind::kStrategy, "strategy", scope.merged, registry,
                        strategy_host_options(), scope.base_dir, &out.strategy_host, scope.diag);
  out.optimizer =
      resolve_component(ComponentKind::kOptimizer, "optimizer", scope.merged, registry,
                        {plugin_option("optimizer")}, scope.base_dir, nullptr, scope.diag);
  resolve_adversarial(scope, registry, out);
  if (out.strategy.component != nullptr) {
    check_strategy_host(scope.merged.at("strategy"), out.strategy_host, scope.diag);
    check_precision(scope.merged, out, scope.diag);
    check_stop_when(scope.merged, out, scope.diag);
    check_batch_split(scope.merged, out, scope.diag);
  }
}

// Validates a [[variant]]'s gradcheck expectation (expect, rtol, atol) into `out`.
void resolve_expectation(const VariantData& variant, const fs::path& base_dir, ResolvedVariant& out,
                         Diagnostics& diag) {
  SectionData meta;
  meta.loc = variant.loc;
  meta.keys = variant.expectation;
  const std::vector<OptionDecl> decls = {
      string_option("expect", "contract",
                    "gradcheck: contract (keep the strategy's contract; without one, match the "
                    "reference), match (the reference) or differ (break the contract)")
          .one_of({"contract", "match", "differ"}),
      float_option("rtol", 1e-5, "gradcheck: relative tolerance").at_least(0),
      float_option("atol", 1e-6, "gradcheck: absolute tolerance").at_least(0)};
  ConfigView view("variant", decls,
                  validate_section({"variant", &meta, decls, "[[variant]]", base_dir}, diag));
  out.expect = view.get_string("expect");
  out.rtol = view.get_float("rtol");
  out.atol = view.get_float("atol");
}

// The variant as it ran, as TOML: every declared key, set or default; the bert_config when it
// resolved without problems.
std::string resolved_toml(const ExperimentFile& file, const ResolvedVariant& out,
                          bool with_bert_config) {
  std::string t = fmt::format("# variant '{}' of {}, as it ran (defaults marked)\n", out.name,
                              file.path.string());
  if (out.init_from) {
    t += fmt::format(
        "# [model] init_from = \"{}\": it starts from the final weights of run {} (its "
        "config_hash {}), the init_checkpoint below\n",
        out.init_from->variant, out.init_from->label(), out.init_from->config_hash);
  }
  append_section_toml(t, "experiment", {&out.experiment}, "");
  append_section_toml(t, "model", {&out.model}, "");
  if (with_bert_config) append_bert_config_toml(t, out.bert_config);
  append_section_toml(t, "task", {&out.task.options}, out.task.plugin);
  append_section_toml(t, "strategy", {&out.strategy_host, &out.strategy.options},
                      out.strategy.plugin);
  append_section_toml(t, "optimizer", {&out.optimizer.options}, out.optimizer.plugin);
  if (out.adversarial.component != nullptr) {
    append_section_toml(t, "adversarial", {&out.adversarial.options}, out.adversarial.plugin);
  }
  append_section_toml(t, "train", {&out.train}, "");
  return t;
}

// Merges one variant (nullptr: the base alone) with --set and validates every section.
ResolvedVariant resolve_variant(const ExperimentFile& file, const VariantData* variant,
                                const ComponentRegistry& registry,
                                const std::vector<SetOverride>& overrides, Diagnostics& diag) {
  ResolvedVariant out;
  out.name = variant != nullptr ? variant->name : "default";
  Sections merged = merge_variant(file, variant, overrides);
  // The file's [experiment] seeds list is read by the parser; one set elsewhere is refused here.
  if (auto seeds = merged.at("experiment").keys.find("seeds");
      seeds != merged.at("experiment").keys.end()) {
    diag.add(seeds->second.loc, "experiment", "seeds",
             "the seeds are listed once for the whole experiment, in the file's [experiment] "
             "(seeds = [1, 2, 3]); a variant sets `seed`, and the command line "
             "--set experiment.repeats=N (seeds seed, seed+1, ...)");
    merged.at("experiment").keys.erase(seeds);
  }
  const fs::path& base_dir = file.base_dir;
  const VariantScope scope{merged, base_dir, diag};

  out.experiment = ConfigView("experiment", experiment_options(),
                              validate_section({"experiment", &merged.at("experiment"),
                                                experiment_options(), "[experiment]", base_dir},
                                               diag));
  if (const auto name = merged.at("experiment").keys.find("name");
      name != merged.at("experiment").keys.end() && name->second.value &&
      std::holds_alternative<std::string>(*name->second.value)) {
    if (auto problem = path_component_problem(std::get<std::string>(*name->second.value))) {
      diag.add(name->second.value_loc, "experiment", "name", *problem);
    }
  }
  out.train = ConfigView(
      "train", train_options(),
      validate_section({"train", &merged.at("train"), train_options(), "[train]", base_dir}, diag));
  resolve_model(scope, out);
  resolve_components(scope, registry, out);
  if (variant != nullptr) resolve_expectation(*variant, base_dir, out, diag);
  out.resolved_toml = resolved_toml(file, out, diag.lines().empty());
  return out;
}

// The variants the file defines (the base alone as "default" when it has none) into
// out.all_variant_names; returns those --variant selects (all without it).
std::vector<const VariantData*> select_variants(const ExperimentFile& file,
                                                const ResolveOptions& options,
                                                ResolvedExperiment& out,
                                                std::vector<std::string>& errors) {
  std::vector<const VariantData*> all;
  for (const auto& v : file.variants) all.push_back(&v);
  if (all.empty()) all.push_back(nullptr);  // no [[variant]]: the base runs as "default"
  for (const auto* v : all) out.all_variant_names.push_back(v ? v->name : "default");

  for (const auto& name : options.selected_variants) {
    auto it = std::find(out.all_variant_names.begin(), out.all_variant_names.end(), name);
    if (it == out.all_variant_names.end()) {
      auto close = closest_match(name, out.all_variant_names);
      errors.push_back(fmt::format("--variant '{}': {}: no such variant{}; variants: {}", name,
                                   file.path.string(),
                                   close ? fmt::format("; did you mean '{}'?", *close) : "",
                                   fmt::join(out.all_variant_names, ", ")));
    }
  }
  std::vector<const VariantData*> selected;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& names = options.selected_variants;
    if (names.empty() ||
        std::find(names.begin(), names.end(), out.all_variant_names[i]) != names.end()) {
      selected.push_back(all[i]);
    }
  }
  return selected;
}

// Resolves the selected variants into out.variants. Problems are gathered per variant; a line
// every variant reports (a base-file problem) is added to `errors` once, one that only some
// report names them.
void resolve_selected(const ExperimentFile& file, const std::vector<const VariantData*>& selected,
                      const ComponentRegistry& registry, const ResolveOptions& options,
                      ResolvedExperiment& out, std::vector<std::string>& errors) {
  std::vector<std::pair<std::string, std::vector<std::string>>> per_line;
  for (const auto* v : selected) {
    Diagnostics diag(v ? v->name : "default");
    out.variants.push_back(resolve_variant(file, v, registry, options.overrides, diag));
    for (const auto& line : diag.lines()) {
      auto it = std::find_if(per_line.begin(), per_line.end(),
                             [&](const auto& p) { return p.first == line; });
      if (it == per_line.end()) {
        per_line.push_back({line, {diag.variant()}});
      } else if (std::find(it->second.begin(), it->second.end(), diag.variant()) ==
                 it->second.end()) {
        it->second.push_back(diag.variant());
      }
    }
  }
  for (const auto& [line, variants] : per_line) {
    if (variants.size() == selected.size() || selected.size() <= 1) {
      errors.push_back(line);
    } else {
      errors.push_back(fmt::format("{} (variant {})", line, fmt::join(variants, ", ")));
    }
  }
}

// The variants that selected ones start from (init_from, transitively) that --variant left out,
// resolved into out.dependencies: their folders and configurations link the runs to them.
void resolve_dependencies(const ExperimentFile& file, const ComponentRegistry& registry,
                          const ResolveOptions& options, ResolvedExperiment& out,
                          std::vector<std::string>& errors) {
  std::set<std::string> have;
  std::vector<std::string> wanted;
  for (const auto& v : out.variants) {
    have.insert(v.name);
    wanted.push_back(v.model.get_string("init_from"));
  }
  while (!wanted.empty()) {
    const std::string name = wanted.back();
    wanted.pop_back();
    if (name.empty() || !have.insert(name).second) continue;
    auto it = std::find_if(file.variants.begin(), file.variants.end(),
                           [&](const VariantData& d) { return d.name == name; });
    if (it == file.variants.end()) continue;  // link_stages names the unknown variant
    Diagnostics diag(name);
    out.dependencies.push_back(resolve_variant(file, &*it, registry, options.overrides, diag));
    for (const auto& line : diag.lines()) {
      errors.push_back(
          fmt::format("{} (variant {}, which a selected variant starts from)", line, name));
    }
    wanted.push_back(out.dependencies.back().model.get_string("init_from"));
  }
}

// out.reference: [compare] reference, checked against the variants, or the first variant.
void resolve_reference(const ExperimentFile& file, ResolvedExperiment& out,
                       std::vector<std::string>& errors) {
  if (!file.reference) {
    out.reference = out.all_variant_names.front();
    return;
  }
  const Setting& ref = *file.reference;
  if (!ref.value || !std::holds_alternative<std::string>(*ref.value)) return;
  out.reference = std::get<std::string>(*ref.value);
  if (std::find(out.all_variant_names.begin(), out.all_variant_names.end(), out.reference) ==
      out.all_variant_names.end()) {
    auto close = closest_match(out.reference, out.all_variant_names);
    errors.push_back(fmt::format("{}: compare.reference: no variant named '{}'{}; variants: {}",
                                 ref.loc.format(), out.reference,
                                 close ? fmt::format("; did you mean '{}'?", *close) : "",
                                 fmt::join(out.all_variant_names, ", ")));
  }
}

// The seeds a variant runs with: [experiment] seeds, or repeats seeds from its seed on.
std::vector<int64_t> seeds_of(const ExperimentFile& file, const ResolvedVariant& variant) {
  if (!file.seeds.empty()) return file.seeds;
  std::vector<int64_t> seeds;
  const int64_t first = variant.experiment.get_int("seed");
  for (int64_t k = 0; k < variant.experiment.get_int("repeats"); ++k) seeds.push_back(first + k);
  return seeds;
}

// Several seeds: each variant replaced by one run per seed (its [experiment] seed set to it, its
// folder VARIANT/seed-S). One listed seed: that seed, in the usual folder.
void expand_seeds(const ExperimentFile& file, std::vector<ResolvedVariant>& variants,
                  std::vector<int64_t>& all_seeds) {
  for (const auto& v : variants) {
    if (!file.seeds.empty() && v.experiment.has("repeats")) {
      throw ConfigError(fmt::format(
          "{}: experiment.seeds: set seeds or repeats, not both (variant '{}' has repeats = {})",
          file.seeds_loc.format(), v.name, v.experiment.get_int("repeats")));
    }
  }
  std::vector<ResolvedVariant> runs;
  for (const auto& v : variants) {
    const std::vector<int64_t> seeds = seeds_of(file, v);
    // With repeats set per variant, the experiment's seeds are the longest list.
    if (seeds.size() > all_seeds.size()) all_seeds = seeds;
    for (const int64_t seed : seeds) {
      ResolvedVariant run = v;
      std::map<std::string, OptionValue> values = v.experiment.values();
      values["seed"] = seed;
      run.experiment = ConfigView("experiment", v.experiment.declarations(), std::move(values));
      if (seeds.size() > 1) run.repeat_seed = seed;
      run.resolved_toml = resolved_toml(file, run, true);
      runs.push_back(std::move(run));
    }
  }
  variants = std::move(runs);
}

}  // namespace

std::filesystem::path ResolvedVariant::run_folder() const {
  if (!repeat_seed) return name;
  return std::filesystem::path(name) / fmt::format("seed-{}", *repeat_seed);
}

ResolvedExperiment resolve_experiment(const ExperimentFile& file, const ComponentRegistry& registry,
                                      const ResolveOptions& options) {
  ResolvedExperiment out;
  out.file = file.path;
  std::vector<std::string> errors;
  const std::vector<const VariantData*> selected = select_variants(file, options, out, errors);
  resolve_selected(file, selected, registry, options, out, errors);
  resolve_reference(file, out, errors);
  resolve_dependencies(file, registry, options, out, errors);
  if (!errors.empty()) throw ConfigError(errors);

  expand_seeds(file, out.variants, out.seeds);
  std::vector<int64_t> dependency_seeds;
  expand_seeds(file, out.dependencies, dependency_seeds);
  if (file.sweep) {
    const size_t runs = file.variants.size() * out.seeds.size();
    if (runs > static_cast<size_t>(file.sweep->max_runs)) {
      throw ConfigError(fmt::format(
          "{}: sweep: {} runs ({} variants × {} seed(s)) is more than max_runs = {}; narrow the "
          "sweep, or raise [sweep] max_runs if you mean it",
          file.sweep->loc.format(), runs, file.variants.size(), out.seeds.size(),
          file.sweep->max_runs));
    }
  }
  const ConfigView& exp = out.variants.front().experiment;
  out.name = exp.get_string("name");
  if (options.output_dir) {
    out.output_dir = fs::absolute(*options.output_dir);
  } else {
    out.output_dir = fs::absolute(exp.get_string("output_dir")).lexically_normal();
  }
  link_stages(out, [&](const ResolvedVariant& v) { return resolved_toml(file, v, true); });
  return out;
}

}  // namespace bertlab
