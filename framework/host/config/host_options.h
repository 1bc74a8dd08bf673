#pragma once
// The keys the host owns in each section, declared like plugin options so the same code
// validates them and `bertlab plugins --describe` style tables can show them.

#include <bertlab/config.h>

#include <optional>
#include <string>
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

/// [train] stop_when: the first evaluation during training (eval_every_steps) whose `metric` is
/// at least (or at most) `value` ends the training.
struct StopWhen {
  std::string metric;
  bool at_least = true;  ///< ">=", else "<="
  double value = 0.0;
  bool met(double v) const { return at_least ? v >= value : v <= value; }
  std::string text() const;  ///< "eval_accuracy >= 0.8"
};

/// Parses "METRIC >= VALUE" or "METRIC <= VALUE" (spaces optional); nullopt and `problem`
/// saying what is wrong otherwise.
std::optional<StopWhen> parse_stop_when(const std::string& text, std::string* problem);

}  // namespace bertlab
