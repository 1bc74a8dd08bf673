#pragma once
// PyTorch's SGD: weight decay added to the gradient (L2), momentum with dampening, Nesterov.
// As torch.optim.SGD, with bertlab's schedule, global-norm clipping and exclusion list on top.

#include <bertlab/config.h>
#include <bertlab/grad.h>
#include <bertlab/optimizer.h>
#include <bertlab/optimizer_options.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bertlab::sgd {

struct SgdOptions {
  ScheduleOptions schedule;        ///< lr 0.01, constant, no warmup
  double momentum = 0.0;           ///< 0: plain SGD
  double dampening = 0.0;          ///< the gradient enters the buffer scaled by 1 - dampening
  bool nesterov = false;           ///< Nesterov momentum (needs momentum > 0, dampening 0)
  double weight_decay_rate = 0.0;  ///< L2: added to the gradient, as torch.optim.SGD
  ClipOptions clip;                ///< no clipping by default
  WeightDecayExclusion exclusion;  ///< LayerNorm, layer_norm, bias

  SgdOptions();
  static std::vector<OptionDecl> declarations();
  static SgdOptions from_config(const ConfigView& view);
  /// Throws ConfigError naming the first rule broken.
  void validate() const;
};

class Sgd : public Optimizer {
 public:
  explicit Sgd(SgdOptions options);

  void init(const std::vector<NamedTensor>& parameters, const OptimizerContext& ctx) override;
  StepStats step(GradientSet& grads, int64_t step) override;
  double learning_rate(int64_t step) const override { return schedule_.at(step); }
  /// With momentum: "NAME/momentum_buffer" and "NAME/step" per parameter; none without.
  std::vector<std::pair<std::string, at::Tensor>> state_dict() const override;
  int64_t state_bytes() const override;
  void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) override;

  const SgdOptions& options() const { return options_; }

 private:
  struct Slot {
    at::Tensor param;   // shares storage with the model's parameter
    at::Tensor buffer;  // momentum buffer (momentum > 0)
    at::Tensor steps;   // 0-d int64: updates so far; the first sets the buffer to the gradient
    bool decay = false;
  };

  SgdOptions options_;
  Schedule schedule_;
  ParameterIndex index_;
  std::vector<Slot> slots_;  // in init() order
};

}  // namespace bertlab::sgd
