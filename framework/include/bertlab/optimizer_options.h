#pragma once
// What every optimizer plugin shares: the learning-rate schedule (linear warmup, then linear,
// polynomial, cosine or constant), global-norm clipping and the weight-decay exclusion list,
// each with its [optimizer] option declarations, so that the optimizers read them alike.

#include <bertlab/config.h>
#include <bertlab/grad.h>
#include <bertlab/optimizer.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bertlab {

/// What follows the warmup.
enum class DecayKind {
  kLinear,      ///< Google's: (lr - end)·(1 - step/T) + end, counted from step 0
  kPolynomial,  ///< tf.train.polynomial_decay: (lr - end)·(1 - step/T)^power + end, from step 0
  kCosine,      ///< Hugging Face's: half a cosine from lr to end over the steps after warmup
  kConstant,    ///< lr after the warmup
};

/// "linear", "polynomial", "cosine", "constant".
const char* to_string(DecayKind kind);

/// The schedule as configured: `learning_rate`, `warmup_proportion`, `num_warmup_steps`,
/// `schedule`, `power`, `end_learning_rate`.
struct ScheduleOptions {
  double learning_rate = 5e-5;     ///< peak learning rate (Google's init_lr)
  double warmup_proportion = 0.1;  ///< fraction of num_train_steps spent warming up
  int64_t num_warmup_steps = -1;   ///< -1: int(num_train_steps * warmup_proportion)
  DecayKind decay = DecayKind::kLinear;
  double power = 1.0;              ///< kPolynomial's exponent (NVIDIA's BERT uses 0.5)
  double end_learning_rate = 0.0;  ///< the rate the decay ends at (linear, polynomial, cosine)

  /// The declarations, with `default_learning_rate` and `default_warmup_proportion` as the
  /// optimizer's own defaults.
  static std::vector<OptionDecl> declarations(double default_learning_rate,
                                              double default_warmup_proportion,
                                              const std::string& default_schedule = "linear");
  /// Reads the schedule's options from a validated view.
  static ScheduleOptions from_config(const ConfigView& view);
  /// Throws ConfigError naming the first rule broken.
  void validate() const;
};

/// A schedule bound to a run's number of optimizer steps.
class Schedule {
 public:
  Schedule() = default;
  /// Throws Error when num_train_steps <= 0 and the decay needs it.
  Schedule(const ScheduleOptions& options, int64_t num_train_steps);

  /// The rate of the update at `step` (Google's global_step before it; 0 for the first).
  /// Warmup: lr·step/W while step < W (0 at step 0, as Google's and Hugging Face's).
  double at(int64_t step) const;
  int64_t num_warmup_steps() const { return num_warmup_steps_; }
  int64_t num_train_steps() const { return num_train_steps_; }
  /// "linear warmup 10 steps, then cosine to 0 by step 100", for logs.
  std::string describe() const;

 private:
  ScheduleOptions options_;
  int64_t num_train_steps_ = 0;
  int64_t num_warmup_steps_ = 0;
};

/// Gradient clipping as configured: `clip_norm` and `clip_norm_mode`.
struct ClipOptions {
  double clip_norm = 1.0;  ///< global-norm threshold; 0 disables clipping
  NormMode mode = NormMode::kCoalesced;

  static std::vector<OptionDecl> declarations(double default_clip_norm);
  static ClipOptions from_config(const ConfigView& view);
  /// Clips `grads` in place when clip_norm > 0. Returns the global norm before clipping.
  double apply(GradientSet& grads) const;
};

/// The Adam family's hyperparameters: `beta_1`, `beta_2`, `epsilon`, `weight_decay_rate`.
struct AdamHyperparameters {
  double beta_1 = 0.9;              ///< first-moment decay
  double beta_2 = 0.999;            ///< second-moment decay
  double epsilon = 1e-6;            ///< added to the denominator's square root
  double weight_decay_rate = 0.01;  ///< decoupled weight decay

  /// The declarations, with the optimizer's own epsilon and weight-decay defaults.
  static std::vector<OptionDecl> declarations(double default_epsilon,
                                              double default_weight_decay_rate);
  static AdamHyperparameters from_config(const ConfigView& view);
  /// Throws ConfigError naming the first rule broken.
  void validate() const;
};

/// The weight-decay exclusion list: `exclude_from_weight_decay`, comma-separated name parts.
struct WeightDecayExclusion {
  std::vector<std::string> parts = {"LayerNorm", "layer_norm", "bias"};

  /// `default_parts` as written in the option ("LayerNorm,layer_norm,bias").
  static OptionDecl declaration(const std::string& default_parts);
  static WeightDecayExclusion from_config(const ConfigView& view);
  /// As Google's _do_use_weight_decay: false at rate 0 and for a name containing any part.
  bool decays(const std::string& parameter_name, double weight_decay_rate) const;
};

/// What the Adam-family optimizers (adam_weight_decay, lamb, adamw) configure alike; each one's
/// options derive from it and add their own keys.
struct AdamFamilyOptions {
  ScheduleOptions schedule;
  AdamHyperparameters adam;
  ClipOptions clip;
  WeightDecayExclusion exclusion;

  /// The declarations of the schedule, Adam, clipping and exclusion keys, with this object's
  /// values as the defaults.
  std::vector<OptionDecl> common_declarations() const;
  /// Reads those keys from a validated view.
  void read_common(const ConfigView& view);
  /// Throws ConfigError naming the first rule broken.
  void validate_common() const;
};

/// One tensor of an optimizer's state: its name in state_dict() and the tensor it restores.
struct SlotRef {
  std::string name;    ///< e.g. "bert.pooler.dense.weight/exp_avg"
  at::Tensor* target;  ///< copied into in place; the shapes must agree
};

/// load_state_dict's common part: copies every target's tensor from `state`. Throws Error naming
/// a missing, unexpected or mis-shaped tensor; `optimizer` names the optimizer in messages.
void load_slots(const std::vector<std::pair<std::string, at::Tensor>>& state,
                const std::vector<SlotRef>& targets, const std::string& optimizer);

/// The parameters an optimizer updates, by name: init()'s checks and step()'s look-up.
class ParameterIndex {
 public:
  /// Throws Error for an undefined or twice-listed parameter; `optimizer` names it in messages.
  void reset(const std::vector<NamedTensor>& parameters, const std::string& optimizer);
  size_t size() const { return names_.size(); }
  /// The position in reset()'s list of the parameter `grad` is for. Throws Error for a name
  /// that was not passed to reset() or a gradient of another shape.
  size_t at(const GradientEntry& grad) const;
  /// The position of `name`, throwing Error when there is none.
  size_t at(const std::string& name) const;
  /// The name of the parameter at position `i`.
  const std::string& name(size_t i) const { return names_.at(i); }

 private:
  std::string optimizer_;
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_;
  std::unordered_map<std::string, size_t> index_;
};

/// Splits "a, b,c" into {"a", "b", "c"} (blanks trimmed, empty items dropped).
std::vector<std::string> split_names(const std::string& list);

}  // namespace bertlab
