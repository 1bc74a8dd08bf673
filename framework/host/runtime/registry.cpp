// The registry of components (tasks, strategies, optimizers) that plugins register.

#include "runtime/registry.h"

#include <bertlab/error.h>

namespace bertlab {

const char* to_string(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kTask:
      return "task";
    case ComponentKind::kStrategy:
      return "strategy";
    case ComponentKind::kOptimizer:
      return "optimizer";
    case ComponentKind::kAdversarial:
      return "adversarial";
  }
  return "?";
}

void ComponentRegistry::add(Component component) {
  const auto key = std::make_pair(static_cast<int>(component.kind), component.spec.name);
  BERTLAB_CHECK_AS(PluginError, !component.spec.name.empty(), "{}: a {} has an empty name",
                   component.origin.file.string(), to_string(component.kind));
  auto it = components_.find(key);
  if (it != components_.end()) {
    throw PluginError(fmt::format(
        "{}: {} '{}' is registered twice: by {} (plugin '{}') and by {} (plugin '{}'); remove "
        "one of the two libraries from the plugin path",
        component.origin.file.string(), to_string(component.kind), component.spec.name,
        it->second.origin.file.string(), it->second.origin.plugin_name,
        component.origin.file.string(), component.origin.plugin_name));
  }
  components_.emplace(key, std::move(component));
}

void ComponentRegistry::add_task(ComponentSpec spec, TaskFactory factory) {
  Component c{ComponentKind::kTask, std::move(spec), current_, std::move(factory), {}, {}, {}};
  add(std::move(c));
}

void ComponentRegistry::add_strategy(ComponentSpec spec, StrategyFactory factory) {
  Component c{ComponentKind::kStrategy, std::move(spec), current_, {}, std::move(factory), {}, {}};
  add(std::move(c));
}

void ComponentRegistry::add_optimizer(ComponentSpec spec, OptimizerFactory factory) {
  Component c{ComponentKind::kOptimizer, std::move(spec), current_, {}, {}, std::move(factory), {}};
  add(std::move(c));
}

void ComponentRegistry::add_adversarial(ComponentSpec spec, AdversarialFactory factory) {
  Component c{ComponentKind::kAdversarial, std::move(spec), current_, {}, {}, {},
              std::move(factory)};
  add(std::move(c));
}

void ComponentRegistry::add_tool(std::string group, std::string name, std::string description,
                                 ToolMain main) {
  if (const Tool* existing = find_tool(group, name)) {
    throw PluginError(fmt::format(
        "{}: tool '{} {}' is registered twice: by {} and by {}; remove one of the two libraries "
        "from the plugin path",
        current_.file.string(), group, name, existing->origin.file.string(),
        current_.file.string()));
  }
  tools_.push_back(
      Tool{std::move(group), std::move(name), std::move(description), std::move(main), current_});
}

const Component* ComponentRegistry::find(ComponentKind kind, const std::string& name) const {
  auto it = components_.find(std::make_pair(static_cast<int>(kind), name));
  return it == components_.end() ? nullptr : &it->second;
}

std::vector<std::string> ComponentRegistry::names(ComponentKind kind) const {
  std::vector<std::string> out;
  for (const auto& [key, c] : components_) {
    if (c.kind == kind) out.push_back(c.spec.name);
  }
  return out;
}

std::vector<const Component*> ComponentRegistry::all() const {
  std::vector<const Component*> out;
  for (const auto& [key, c] : components_) out.push_back(&c);
  return out;
}

std::vector<const Component*> ComponentRegistry::find_any(const std::string& name) const {
  std::vector<const Component*> out;
  for (const auto& [key, c] : components_) {
    if (c.spec.name == name) out.push_back(&c);
  }
  return out;
}

const Tool* ComponentRegistry::find_tool(const std::string& group, const std::string& name) const {
  for (const auto& t : tools_) {
    if (t.group == group && t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace bertlab
