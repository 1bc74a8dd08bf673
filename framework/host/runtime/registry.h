#pragma once
// The host's registry of components, filled by each plugin's register function.

#include <bertlab/plugin.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bertlab {

/// Which plugin library a component or tool came from.
struct PluginOrigin {
  std::string plugin_name;
  std::string plugin_version;
  std::filesystem::path file;
};

struct Component {
  ComponentKind kind;
  ComponentSpec spec;
  PluginOrigin origin;
  TaskFactory task_factory;                ///< set when kind == kTask
  StrategyFactory strategy_factory;        ///< set when kind == kStrategy
  OptimizerFactory optimizer_factory;      ///< set when kind == kOptimizer
  AdversarialFactory adversarial_factory;  ///< set when kind == kAdversarial
};

struct Tool {
  std::string group;
  std::string name;
  std::string description;
  ToolMain main;
  PluginOrigin origin;
};

class ComponentRegistry : public Registry {
 public:
  void add_task(ComponentSpec spec, TaskFactory factory) override;
  void add_strategy(ComponentSpec spec, StrategyFactory factory) override;
  void add_optimizer(ComponentSpec spec, OptimizerFactory factory) override;
  void add_adversarial(ComponentSpec spec, AdversarialFactory factory) override;
  void add_tool(std::string group, std::string name, std::string description,
                ToolMain main) override;

  /// Registrations made from now on are attributed to `origin`.
  void set_current_origin(PluginOrigin origin) { current_ = std::move(origin); }

  /// The component of `kind` named `name`, or nullptr.
  const Component* find(ComponentKind kind, const std::string& name) const;
  /// Names of every component of `kind`, sorted.
  std::vector<std::string> names(ComponentKind kind) const;
  /// Every component, sorted by kind then name.
  std::vector<const Component*> all() const;
  /// Every component named `name`, of any kind.
  std::vector<const Component*> find_any(const std::string& name) const;

  const Tool* find_tool(const std::string& group, const std::string& name) const;
  const std::vector<Tool>& tools() const { return tools_; }

 private:
  void add(Component component);

  PluginOrigin current_;
  std::map<std::pair<int, std::string>, Component> components_;
  std::vector<Tool> tools_;
};

}  // namespace bertlab
