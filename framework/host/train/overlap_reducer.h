#pragma once
// Dense gradients averaged while backward runs (a strategy's overlap_bucket_mb() > 0), as
// PyTorch DDP does: a post hook on the gradient accumulator of every dense parameter; buckets
// of parameters in reverse named_parameters() order (the order backward produces their
// gradients); a bucket's all-reduce starts as soon as all its gradients exist, buckets in a fixed
// order on every rank. Private to libbertlab.

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}
namespace torch::autograd {
struct Node;
}

namespace bertlab {

class Communicator;
class GradientSet;
class PendingCollective;

/// What one overlapped step did.
struct OverlapStats {
  int64_t buckets = 0;              ///< all-reduces of the step
  int64_t buckets_in_backward = 0;  ///< of them, started by a hook before backward returned
};

class OverlapReducer {
 public:
  /// `model`'s parameters that require a gradient; buckets of at most `bucket_mb` MiB.
  OverlapReducer(torch::nn::Module& model, Communicator& comm, double bucket_mb);
  /// Removes the hooks if a step was left armed (an exception).
  ~OverlapReducer();
  OverlapReducer(const OverlapReducer&) = delete;
  OverlapReducer& operator=(const OverlapReducer&) = delete;

  /// Before the backward pass whose gradients are averaged (with gradient accumulation, the
  /// last micro-batch's; the earlier ones only accumulate). Buckets cover the parameters that
  /// had a dense gradient after the previous step (all of them in the first).
  void arm();
  /// After that backward: removes the hooks, starts the buckets not started yet (those with a
  /// parameter whose hook did not fire) in order, waits for every bucket and writes the mean
  /// into the parameters' gradients. A parameter whose hook did not fire, or whose gradient is
  /// sparse, is left alone (for the strategy's reduce_gradients).
  OverlapStats finish();
  /// Marks the entries finish() averaged (GradientEntry::averaged).
  void mark_averaged(GradientSet& grads) const;

 private:
  class Hook;
  struct Bucket {
    std::vector<size_t> members;  ///< parameter indices, in the order they are flattened
    size_t waiting = 0;           ///< members whose hook has not fired yet this step
    std::vector<size_t> sent;     ///< members whose dense gradient is in `flat`
    at::Tensor flat;
    std::unique_ptr<PendingCollective> pending;
  };

  /// The hook of parameter `index`: its gradient is complete for this backward.
  void on_ready(size_t index);
  /// Flattens bucket `k`'s fired dense gradients and starts their all-reduce.
  void launch(size_t k);
  void disarm();

  Communicator& comm_;
  double bucket_mb_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> params_;
  std::vector<bool> in_layout_;  ///< bucketed next step
  std::vector<bool> fired_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
  std::vector<size_t> averaged_;  ///< parameters averaged by the last finish()
  std::mutex mutex_;              // hooks may run on autograd's device threads
  bool armed_ = false;
  size_t next_launch_ = 0;
  int64_t launched_in_backward_ = 0;
  std::exception_ptr error_;  ///< a failed launch inside a hook, rethrown by finish()
};

}  // namespace bertlab
