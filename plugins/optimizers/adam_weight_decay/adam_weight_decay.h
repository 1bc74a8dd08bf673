#pragma once
// Google BERT's AdamWeightDecayOptimizer and learning-rate schedule (optimization.py):
// Adam without bias correction, decoupled weight decay except for excluded names, linear
// warmup then linear decay to 0 (or another schedule), gradients clipped by global norm first.

#include <bertlab/config.h>
#include <bertlab/grad.h>
#include <bertlab/optimizer.h>
#include <bertlab/optimizer_options.h>

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

/// Google's defaults: schedule (peak lr 5e-5, linear warmup and decay to 0), Adam (epsilon 1e-6,
/// weight decay 0.01 added to the update), clipping at 1.0 as create_optimizer, exclusions
/// LayerNorm, layer_norm, bias.
struct AdamWeightDecayOptions : AdamFamilyOptions {
  SparseUpdate sparse_update = SparseUpdate::kDense;  ///< see SparseUpdate

  /// The option declarations of the [optimizer] section.
  static std::vector<OptionDecl> declarations();
  /// Reads every option once from a validated view.
  static AdamWeightDecayOptions from_config(const ConfigView& view);
  /// Throws ConfigError naming the first rule broken.
  void validate() const;
};

class AdamWeightDecay : public Optimizer {
 public:
  explicit AdamWeightDecay(AdamWeightDecayOptions options);

  void init(const std::vector<NamedTensor>& parameters, const OptimizerContext& ctx) override;
  StepStats step(GradientSet& grads, int64_t step) override;
  double learning_rate(int64_t step) const override;
  /// "NAME/adam_m" and "NAME/adam_v" per parameter, as Google's checkpoints name the slots.
  std::vector<std::pair<std::string, at::Tensor>> state_dict() const override;
  int64_t state_bytes() const override;
  void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) override;

  const AdamWeightDecayOptions& options() const { return options_; }
  /// The resolved number of warmup steps (valid after init()).
  int64_t num_warmup_steps() const { return schedule_.num_warmup_steps(); }
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

  // `grad_scale`: the clipping factor, applied as the gradient is read.
  void update_dense(Slot& slot, at::Tensor grad, double lr, double grad_scale = 1.0) const;
  void update_sparse(Slot& slot, const GradientEntry& grad, double lr) const;
  // param -= lr * (m / (sqrt(v) + epsilon) + decay * param), with tensor ops.
  void apply_moments(Slot& slot, double lr) const;

  AdamWeightDecayOptions options_;
  Schedule schedule_;                              // bound in init()
  std::vector<Slot> slots_;                        // [parameter], in init() order
  std::unordered_map<std::string, size_t> index_;  // parameter name -> slot
};

}  // namespace bertlab::adam_weight_decay
