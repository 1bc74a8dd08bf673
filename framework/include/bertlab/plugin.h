#pragma once
// The plugin entry point. A plugin is one shared library that exports
//
//   extern "C" const bertlab::PluginEntry* bertlab_plugin_entry();
//
// returning a plain struct whose first field is the API version. Write it with
// BERTLAB_PLUGIN(name, version, register_fn) and register every component explicitly in
// register_fn; the host refuses a plugin whose API version or ABI tag differs from its own.

#include <bertlab/api_version.h>
#include <bertlab/config.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace bertlab {

class Task;
class Strategy;
class Optimizer;
class Adversarial;
struct StrategyContract;

/// The plugin API version of this SDK (see bertlab/api_version.h).
inline constexpr int kPluginApiVersion = BERTLAB_SDK_API_VERSION;

/// The host's ABI tag (what BERTLAB_SDK_ABI_TAG was when libbertlab was built).
const char* host_abi_tag();

enum class ComponentKind { kTask, kStrategy, kOptimizer, kAdversarial };

/// "task", "strategy", "optimizer", "adversarial".
const char* to_string(ComponentKind kind);

/// A strategy's contract for the options of its section and a number of replicas
/// (bertlab/strategy.h).
using ContractFn = std::function<StrategyContract(const ConfigView& options, int replicas)>;

/// What a component tells the host about itself.
struct ComponentSpec {
  std::string name;                 ///< unique within its kind, e.g. "classifier"
  std::string description;          ///< one line
  std::vector<OptionDecl> options;  ///< the keys of its section besides the host's
  /// Strategies: what the averaged gradient promises, as a function of the options (`bertlab
  /// gradcheck` checks it; `bertlab plugins --describe` shows it). Unset: no contract, and
  /// gradcheck's default expectation is a match with the reference.
  ContractFn contract;
};

using TaskFactory = std::function<std::unique_ptr<Task>(const ConfigView&)>;
using StrategyFactory = std::function<std::unique_ptr<Strategy>(const ConfigView&)>;
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(const ConfigView&)>;
using AdversarialFactory = std::function<std::unique_ptr<Adversarial>(const ConfigView&)>;
/// A command-line tool: `bertlab GROUP NAME args...`; returns the exit code.
using ToolMain = std::function<int(const std::vector<std::string>& args)>;

/// Where a plugin's register function records its components.
class Registry {
 public:
  virtual ~Registry() = default;
  virtual void add_task(ComponentSpec spec, TaskFactory factory) = 0;
  virtual void add_strategy(ComponentSpec spec, StrategyFactory factory) = 0;
  virtual void add_optimizer(ComponentSpec spec, OptimizerFactory factory) = 0;
  /// An adversarial step ([adversarial] plugin; bertlab/adversarial.h).
  virtual void add_adversarial(ComponentSpec spec, AdversarialFactory factory) = 0;
  /// A tool run as `bertlab GROUP NAME ...` (e.g. `bertlab squad evaluate`).
  virtual void add_tool(std::string group, std::string name, std::string description,
                        ToolMain main) = 0;
};

/// The plain struct a plugin's entry point returns. Field order is fixed forever for
/// api_version; the rest may change with it.
struct PluginEntry {
  int api_version;      ///< BERTLAB_API_VERSION the plugin was built with
  const char* abi_tag;  ///< BERTLAB_ABI_TAG the plugin was built with
  const char* name;     ///< plugin name, e.g. "classifier"
  const char* version;  ///< plugin version, e.g. "0.1.0"
  void (*register_components)(Registry& registry);
};

}  // namespace bertlab

/// The entry point's symbol name.
#define BERTLAB_PLUGIN_ENTRY_SYMBOL "bertlab_plugin_entry"

/// Defines the plugin's entry point. Use once per plugin, at namespace scope.
#define BERTLAB_PLUGIN(NAME, VERSION, REGISTER_FN)                                                 \
  extern "C" __attribute__((visibility("default"))) const ::bertlab::PluginEntry*                  \
  bertlab_plugin_entry() {                                                                         \
    static const ::bertlab::PluginEntry entry{BERTLAB_API_VERSION, BERTLAB_ABI_TAG, NAME, VERSION, \
                                              REGISTER_FN};                                        \
    return &entry;                                                                                 \
  }
