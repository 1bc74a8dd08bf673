// Task helpers of the SDK: named batch tensors and the eval-mode scope.

#include <bertlab/error.h>
#include <bertlab/task_helpers.h>

#include <torch/nn/module.h>

namespace bertlab {

const at::Tensor& batch_tensor(const Batch& batch, const std::string& name) {
  const auto it = batch.find(name);
  BERTLAB_CHECK(it != batch.end(), "the batch has no \"{}\" tensor; make it with make_train_batch",
                name);
  return it->second;
}

EvalModeScope::EvalModeScope(torch::nn::Module& module)
    : module_(module), was_training_(module.is_training()) {
  module_.eval();
}

EvalModeScope::~EvalModeScope() { module_.train(was_training_); }

}  // namespace bertlab
