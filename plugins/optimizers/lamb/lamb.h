#pragma once
// LAMB (You et al. 2019) as NVIDIA's BERT runs it (apex FusedLAMB): Adam moments with bias
// correction, decoupled weight decay inside the update, and each parameter's update scaled by
// its trust ratio ‖w‖ / ‖update‖. Gradients are clipped by global norm first.

#include <bertlab/config.h>
#include <bertlab/grad.h>
#include <bertlab/optimizer.h>
#include <bertlab/optimizer_options.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bertlab::lamb {

/// Schedule (peak lr 1e-3, apex's), Adam (epsilon 1e-6 added to sqrt(v̂), weight decay 0.01),
/// clipping at 1.0 (NVIDIA's max_grad_norm); excluded parameters are neither decayed nor
/// layer-adapted (trust ratio 1), as NVIDIA's and ALBERT's LAMB.
struct LambOptions : AdamFamilyOptions {
  bool bias_correction = true;  ///< divide the moments by 1 - beta^t

  LambOptions();
  static std::vector<OptionDecl> declarations();
  static LambOptions from_config(const ConfigView& view);
  /// Throws ConfigError naming the first rule broken.
  void validate() const;
};

class Lamb : public Optimizer {
 public:
  explicit Lamb(LambOptions options);

  void init(const std::vector<NamedTensor>& parameters, const OptimizerContext& ctx) override;
  /// Bias correction uses t = step + 1, the number of this update.
  StepStats step(GradientSet& grads, int64_t step) override;
  double learning_rate(int64_t step) const override { return schedule_.at(step); }
  /// "NAME/exp_avg" and "NAME/exp_avg_sq" per parameter, as apex names them.
  std::vector<std::pair<std::string, at::Tensor>> state_dict() const override;
  int64_t state_bytes() const override;
  void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) override;

  const LambOptions& options() const { return options_; }
  /// The trust ratio of parameter `name` in the last step (1 for excluded parameters).
  double last_trust_ratio(const std::string& name) const;

 private:
  struct Slot {
    at::Tensor param;  // shares storage with the model's parameter
    at::Tensor m;      // first moment
    at::Tensor v;      // second moment
    bool decay = false;
    double trust_ratio = 1.0;
  };

  LambOptions options_;
  Schedule schedule_;
  ParameterIndex index_;
  std::vector<Slot> slots_;  // in init() order
};

}  // namespace bertlab::lamb
