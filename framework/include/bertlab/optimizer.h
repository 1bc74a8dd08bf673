#pragma once
// An optimizer: learning-rate schedule, gradient clipping and the parameter update.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bertlab {

class GradientSet;

struct NamedTensor {
  std::string name;  ///< parameter name (Hugging Face naming)
  at::Tensor tensor;
};

struct OptimizerContext {
  int64_t num_train_steps = 0;  ///< total optimizer steps of the run
};

struct StepStats {
  double learning_rate = 0.0;  ///< the rate used for this step
  double grad_norm = 0.0;      ///< global gradient norm before clipping
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Binds the parameters (updated in place by step()) and creates the slots.
  virtual void init(const std::vector<NamedTensor>& parameters, const OptimizerContext& ctx) = 0;
  /// One update. `step` is Google's global_step before the update (0 for the first one).
  /// `grads` are already averaged over replicas; the optimizer clips them as configured.
  /// When the global gradient norm is not finite (a NaN or infinite gradient) it must leave the
  /// parameters and its state alone and return that norm: the host then stops or skips the step
  /// ([train] on_nonfinite).
  virtual StepStats step(GradientSet& grads, int64_t step) = 0;
  /// The learning rate at `step`.
  virtual double learning_rate(int64_t step) const = 0;
  /// The optimizer's state for a resumable checkpoint (after init()): CPU copies, named by the
  /// optimizer, e.g. "bert.pooler.dense.weight/adam_m" as Google names its slots. A stateless
  /// optimizer returns nothing.
  virtual std::vector<std::pair<std::string, at::Tensor>> state_dict() const = 0;
  /// Restores what state_dict() returned (after init()). Throws Error naming a missing,
  /// unexpected or mis-shaped tensor.
  virtual void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) = 0;
  /// Bytes of state this optimizer holds (after init()): the memory a sharding strategy divides
  /// over the ranks. The default sums state_dict()'s tensors (a copy); an optimizer may say it
  /// without copying.
  virtual int64_t state_bytes() const;
};

}  // namespace bertlab
