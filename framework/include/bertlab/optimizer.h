#pragma once
// An optimizer: learning-rate schedule, gradient clipping and the parameter update.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
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
  virtual StepStats step(GradientSet& grads, int64_t step) = 0;
  /// The learning rate at `step`.
  virtual double learning_rate(int64_t step) const = 0;
};

}  // namespace bertlab
