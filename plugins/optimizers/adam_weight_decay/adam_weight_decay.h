#pragma once
// Google BERT's AdamWeightDecayOptimizer and learning-rate schedule (optimization.py):
// Adam without bias correction, decoupled weight decay except for excluded names, linear
// warmup then linear decay to 0, gradients clipped by global norm before the update.

#include <bertlab/config.h>
#include <bertlab/grad.h>
#include <bertlab/optimizer.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace bertlab::adam_weight_decay {

/// How a sparse (row) gradient updates the moments.
enum class SparseUpdate {
  kDense,              ///< densified first (duplicates summed): the same update as its dense form
  kScatterDuplicates,  ///< moments decayed densely, then each duplicate row scatter-added:
                       ///< v gains sum(u^2) instead of (sum u)^2 (a published bug)
};

struct AdamWeightDecayOptions {
  double learning_rate = 5e-5;      ///< peak learning rate (Google's init_lr)
  double warmup_proportion = 0.1;   ///< fraction of num_train_steps spent warming up
  int64_t num_warmup_steps = -1;    ///< -1: int(num_train_steps * warmup_proportion)
  double weight_decay_rate = 0.01;  ///< decoupled weight decay, added to the update
  double beta_1 = 0.9;              ///< first-moment decay
  double beta_2 = 0.999;            ///< second-moment decay
  double epsilon = 1e-6;            ///< added to sqrt(v)
  double clip_norm = 1.0;           ///< global-norm clipping threshold; 0 disables clipping
  NormMode clip_norm_mode = NormMode::kCoalesced;  ///< how sparse rows enter the norm
  /// A parameter whose name contains any of these is not decayed.
  std::vector<std::string> exclude_from_weight_decay = {"LayerNorm", "layer_norm", "bias"};
  SparseUpdate sparse_update = SparseUpdate::kDense;  ///< see SparseUpdate
  /// LAMB (You et al. 2019) instead: bias-corrected moments and, per parameter, the update
  /// scaled by the trust ratio ‖w‖/‖update‖. Set by the "lamb" component, not an option.
  bool lamb = false;

  /// The option declarations of the [optimizer] section.
  static std::vector<OptionDecl> declarations();
  /// Reads every option once from a validated view.
  static AdamWeightDecayOptions from_config(const ConfigView& view);
  /// Throws ConfigError naming the first rule broken.
  void validate() const;
};

/// Splits "a, b,c" into {"a", "b", "c"} (blanks trimmed, empty items dropped).
std::vector<std::string> split_names(const std::string& list);

class AdamWeightDecay : public Optimizer {
 public:
  explicit AdamWeightDecay(AdamWeightDecayOptions options);

  void init(const std::vector<NamedTensor>& parameters, const OptimizerContext& ctx) override;
  StepStats step(GradientSet& grads, int64_t step) override;
  double learning_rate(int64_t step) const override;
  /// "NAME/adam_m" and "NAME/adam_v" per parameter, as Google's checkpoints name the slots.
  std::vector<std::pair<std::string, at::Tensor>> state_dict() const override;
  void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) override;

  const AdamWeightDecayOptions& options() const { return options_; }
  /// The resolved number of warmup steps (valid after init()).
  int64_t num_warmup_steps() const { return num_warmup_steps_; }
  /// The moments of parameter `name` (for tests and checkpoints): m, v.
  std::pair<at::Tensor, at::Tensor> slots(const std::string& name) const;
  /// Whether parameter `name` receives weight decay.
  bool uses_weight_decay(const std::string& name) const;

 private:
  struct Slot {
    std::string name;
    at::Tensor param;  // shares storage with the model's parameter
    at::Tensor m;      // first moment, [param shape]
    at::Tensor v;      // second moment, [param shape]
    bool decay = false;
  };

  void update_dense(Slot& slot, const at::Tensor& grad, double lr) const;
  void update_sparse(Slot& slot, const GradientEntry& grad, double lr) const;
  // param -= lr * (m / (sqrt(v) + epsilon) + decay * param), with tensor ops.
  void apply_moments(Slot& slot, double lr) const;
  void update_lamb(Slot& slot, const at::Tensor& grad, double lr, int64_t step) const;

  AdamWeightDecayOptions options_;
  int64_t num_train_steps_ = 0;
  int64_t num_warmup_steps_ = 0;
  std::vector<Slot> slots_;                        // [parameter], in init() order
  std::unordered_map<std::string, size_t> index_;  // parameter name -> slot
};

}  // namespace bertlab::adam_weight_decay
