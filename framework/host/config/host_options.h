#pragma once
// The keys the host owns in each section, declared like plugin options so the same code
// validates them and `bertlab plugins --describe` style tables can show them.

#include <bertlab/config.h>

#include <vector>

namespace bertlab {

std::vector<OptionDecl> experiment_options();
/// Host keys of [model]; bert_config fields are added by the caller.
std::vector<OptionDecl> model_options();
std::vector<OptionDecl> train_options();
/// Keys every strategy shares: plugin, device, backend, replicas, launcher, ...
std::vector<OptionDecl> strategy_host_options();
/// `plugin`, the only host key of [task] and [optimizer].
OptionDecl plugin_option(const char* kind);
/// [adversarial] plugin: an adversarial step's component, or "none" (the default: plain training).
OptionDecl adversarial_plugin_option();

}  // namespace bertlab
