#pragma once
// PyTorch's AdamW (Loshchilov & Hutter): Adam with bias correction and weight decay decoupled
// from the gradient (w ← w·(1 − lr·λ) before the Adam step), optionally AMSGrad. As
// torch.optim.AdamW, with bertlab's schedule, global-norm clipping and exclusion list on top.

#include <bertlab/config.h>
#include <bertlab/grad.h>
#include <bertlab/optimizer.h>
#include <bertlab/optimizer_options.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bertlab::adamw {

/// Schedule (peak lr 1e-3, PyTorch's), Adam (epsilon 1e-8 and weight decay 0.01, PyTorch's),
/// clipping at 1.0 (Hugging Face's max_grad_norm), exclusions LayerNorm, layer_norm, bias ("":
/// decay everything, as torch.optim.AdamW alone).
struct AdamWOptions : AdamFamilyOptions {
  bool amsgrad = false;  ///< the denominator from the running maximum of v

  AdamWOptions();
  static std::vector<OptionDecl> declarations();
  static AdamWOptions from_config(const ConfigView& view);
  /// Throws ConfigError naming the first rule broken.
  void validate() const;
};

class AdamW : public Optimizer {
 public:
  explicit AdamW(AdamWOptions options);

  void init(const std::vector<NamedTensor>& parameters, const OptimizerContext& ctx) override;
  /// Bias correction counts each parameter's own updates, as PyTorch's state["step"].
  StepStats step(GradientSet& grads, int64_t step) override;
  double learning_rate(int64_t step) const override { return schedule_.at(step); }
  /// Per parameter, PyTorch's state names: "NAME/exp_avg", "NAME/exp_avg_sq",
  /// "NAME/max_exp_avg_sq" (amsgrad), "NAME/step".
  std::vector<std::pair<std::string, at::Tensor>> state_dict() const override;
  int64_t state_bytes() const override;
  void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) override;

  const AdamWOptions& options() const { return options_; }

 private:
  struct Slot {
    at::Tensor param;  // shares storage with the model's parameter
    at::Tensor m;      // exp_avg
    at::Tensor v;      // exp_avg_sq
    at::Tensor v_max;  // max_exp_avg_sq, amsgrad only
    at::Tensor steps;  // 0-d int64: this parameter's updates so far
    bool decay = false;
  };

  AdamWOptions options_;
  Schedule schedule_;
  ParameterIndex index_;
  std::vector<Slot> slots_;  // in init() order
};

}  // namespace bertlab::adamw
