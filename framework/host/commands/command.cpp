// What the commands share: plugin-folder flags, plugin loading with exceptions that outlive the
// plugins, and the experiment arguments of run, validate and gradcheck.

#include "commands/command.h"

#include <bertlab/error.h>
#include <bertlab/log.h>
#include <torch/csrc/api/include/torch/version.h>

#include <filesystem>

#include "runtime/plugin_host.h"
#include "runtime/threads.h"

namespace bertlab {

namespace fs = std::filesystem;

namespace {

/// Rethrows the exception being handled as a copy whose type's code is this library's.
[[noreturn]] void rethrow_as_host_copy() {
  try {
    throw;
  } catch (const ConfigError& e) {
    throw ConfigError(e.messages());
  } catch (const PluginError& e) {
    throw PluginError(e.what());
  } catch (const DataError& e) {
    throw DataError(e.what());
  } catch (const Interrupted& e) {
    throw Interrupted(e.what(), e.signal());
  } catch (const Error& e) {
    throw Error(e.what());
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
}

}  // namespace

void add_plugin_options(CommandLine& command, PluginOptions& plugins) {
  command.option("--plugin-dir", plugins.plugin_dirs,
                 "extra folder of plugin libraries (repeatable; BERTLAB_PLUGIN_PATH too)");
  command.flag("--allow-insecure-plugins", plugins.allow_insecure,
               "load plugin files or folders that every user may write");
}

void load_plugins(PluginHost& host, const PluginOptions& plugins) {
  std::vector<fs::path> extra(plugins.plugin_dirs.begin(), plugins.plugin_dirs.end());
  host.allow_insecure(plugins.allow_insecure);
  host.load_directories(PluginHost::search_path(extra));
}

void log_versions(const PluginHost& host) {
  log_info("bertlab", "bertlab {}, libtorch {}, {}", BERTLAB_VERSION, TORCH_VERSION,
           blas_description());
  for (const auto& p : host.plugins()) {
    log_info("plugin", "{} {} from {}", p.name, p.version, p.file.string());
  }
}

int with_plugin_host(const std::function<int(PluginHost&)>& body) {
  PluginHost host;
  try {
    return body(host);
  } catch (...) {
    rethrow_as_host_copy();
  }
}

void add_experiment_args(CommandLine& command, ExperimentArgs& args, const std::string& verb) {
  command.positional("experiment", args.file, "experiment TOML file");
  command.option("--variant", args.variants, verb + " only this variant (repeatable)");
  command.option("--set", args.sets, "override SECTION.KEY=VALUE (repeatable)");
}

ResolvedExperiment load_experiment(const PluginHost& host, const ExperimentArgs& args) {
  ExperimentFile parsed = parse_experiment_file(args.file);
  ResolveOptions options;
  std::vector<std::string> errors;
  for (const auto& s : args.sets) {
    try {
      options.overrides.push_back(parse_set_argument(s));
    } catch (const ConfigError& e) {
      errors.insert(errors.end(), e.messages().begin(), e.messages().end());
    }
  }
  if (!errors.empty()) throw ConfigError(errors);
  options.selected_variants = args.variants;
  if (!args.output_dir.empty()) options.output_dir = fs::path(args.output_dir);
  return resolve_experiment(parsed, host.registry(), options);
}

}  // namespace bertlab
