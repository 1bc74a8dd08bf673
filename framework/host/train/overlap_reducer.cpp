// Averaging dense gradients in buckets while backward runs (DDP-style overlap).

#include "train/overlap_reducer.h"

#include <ATen/ATen.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <unordered_set>

namespace bertlab {

/// Runs after a parameter's AccumulateGrad node, i.e. once its gradient of this backward has
/// been added to .grad(). The signature is the same in libtorch 1.13 and 2.x.
class OverlapReducer::Hook final : public torch::autograd::FunctionPostHook {
 public:
  Hook(OverlapReducer* reducer, size_t index) : reducer_(reducer), index_(index) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    reducer_->on_ready(index_);
    return outputs;
  }

 private:
  OverlapReducer* reducer_;
  size_t index_;
};

OverlapReducer::OverlapReducer(torch::nn::Module& model, Communicator& comm, double bucket_mb)
    : comm_(comm), bucket_mb_(bucket_mb) {
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    names_.push_back(item.key());
    params_.push_back(item.value());
  }
  in_layout_.assign(params_.size(), true);
  bucket_of_.assign(params_.size(), 0);
}

OverlapReducer::~OverlapReducer() {
  try {
    disarm();
  } catch (...) {  // NOLINT(bugprone-empty-catch): removing a hook does not fail
  }
}

void OverlapReducer::arm() {
  BERTLAB_CHECK(!armed_, "OverlapReducer::arm: the previous step was not finished");
  buckets_.clear();
  averaged_.clear();
  fired_.assign(params_.size(), false);
  next_launch_ = 0;
  launched_in_backward_ = 0;
  error_ = nullptr;
  // Buckets in reverse parameter order, as all_reduce_mean_dense fills them in forward order.
  const auto bucket_bytes = static_cast<int64_t>(bucket_mb_ * 1024.0 * 1024.0);
  int64_t bytes = 0;
  for (size_t i = params_.size(); i-- > 0;) {
    if (!in_layout_[i]) continue;
    const int64_t param_bytes =
        params_[i].numel() * static_cast<int64_t>(params_[i].element_size());
    if (buckets_.empty() ||
        (!buckets_.back().members.empty() && bytes + param_bytes > bucket_bytes)) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().members.push_back(i);
    ++buckets_.back().waiting;
    bucket_of_[i] = buckets_.size() - 1;
    bytes += param_bytes;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& bucket : buckets_) {
    for (size_t i : bucket.members) {
      std::shared_ptr<torch::autograd::Node> accumulator =
          torch::autograd::impl::grad_accumulator(params_[i]);
      BERTLAB_CHECK(accumulator != nullptr, "overlap: parameter {} has no gradient accumulator",
                    names_[i]);
      const uintptr_t key = accumulator->add_post_hook(std::make_unique<Hook>(this, i));
      hooks_.emplace_back(std::move(accumulator), key);
    }
  }
  armed_ = true;
}

void OverlapReducer::on_ready(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_ || error_ || fired_[index]) return;
  fired_[index] = true;
  --buckets_[bucket_of_[index]].waiting;
  try {
    // In order: a bucket waits for the ones before it, so every rank starts them alike.
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].waiting == 0) {
      launch(next_launch_++);
      ++launched_in_backward_;
    }
  } catch (...) {
    error_ = std::current_exception();
  }
}

void OverlapReducer::launch(size_t k) {
  Bucket& bucket = buckets_[k];
  std::vector<at::Tensor> parts;
  for (size_t i : bucket.members) {
    const at::Tensor& grad = params_[i].grad();
    if (!fired_[i] || !grad.defined() || grad.is_sparse()) continue;
    bucket.sent.push_back(i);
    parts.push_back(grad.reshape({-1}));
  }
  // A bucket none of whose gradients exist still takes part, so that every rank starts the same
  // number of collectives.
  std::vector<at::Tensor> buffer{
      parts.empty() ? at::zeros({1}, params_[bucket.members.front()].options()) : at::cat(parts)};
  comm_.set_traffic(Traffic::kDense);
  try {
    bucket.pending = comm_.all_reduce_sum_async(buffer);
  } catch (...) {
    comm_.set_traffic(Traffic::kOther);
    throw;
  }
  comm_.set_traffic(Traffic::kOther);
  bucket.flat = buffer[0];
}

void OverlapReducer::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
  for (auto& [node, key] : hooks_) node->del_post_hook(key);
  hooks_.clear();
}

OverlapStats OverlapReducer::finish() {
  BERTLAB_CHECK(armed_, "OverlapReducer::finish without arm");
  disarm();
  if (error_) std::rethrow_exception(error_);
  while (next_launch_ < buckets_.size()) launch(next_launch_++);
  const double world = comm_.world_size();
  for (Bucket& bucket : buckets_) {
    bucket.pending->wait();
    bucket.pending.reset();
    bucket.flat.div_(world);
    int64_t offset = 0;
    for (size_t i : bucket.sent) {
      const at::Tensor& grad = params_[i].grad();
      const int64_t n = grad.numel();
      grad.copy_(bucket.flat.narrow(0, offset, n).view(grad.sizes()));
      offset += n;
      averaged_.push_back(i);
    }
    bucket.flat = at::Tensor();
  }
  // The next step buckets what has a dense gradient now.
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& grad = params_[i].grad();
    in_layout_[i] = grad.defined() && !grad.is_sparse();
  }
  OverlapStats stats;
  stats.buckets = static_cast<int64_t>(buckets_.size());
  stats.buckets_in_backward = launched_in_backward_;
  return stats;
}

void OverlapReducer::mark_averaged(GradientSet& grads) const {
  std::unordered_set<std::string> names;
  for (size_t i : averaged_) names.insert(names_[i]);
  for (auto& entry : grads.entries()) {
    if (!entry.is_sparse() && names.count(entry.name) != 0) entry.averaged = true;
  }
}

}  // namespace bertlab
