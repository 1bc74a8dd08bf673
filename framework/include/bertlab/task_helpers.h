#pragma once
// What every task's compute_loss() and evaluate() need: a batch's tensors by name, with an error
// that says which is missing, and eval mode for the length of an evaluation.

#include <bertlab/task.h>

#include <string>

namespace bertlab {

/// The tensor `name` of `batch`; a bertlab::Error naming it when the batch has none.
const at::Tensor& batch_tensor(const Batch& batch, const std::string& name);

/// Puts a module in eval mode and gives it back its previous mode when the scope ends, on an
/// exception too.
class EvalModeScope {
 public:
  explicit EvalModeScope(torch::nn::Module& module);
  ~EvalModeScope();
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

}  // namespace bertlab
