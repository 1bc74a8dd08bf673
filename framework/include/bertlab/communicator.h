#pragma once
// The small interface strategy code talks to for collectives. A rank is one replica.
// Implementations: a world of one (always available) and c10d process groups.

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace bertlab {

class Communicator {
 public:
  virtual ~Communicator() = default;
  /// This replica's rank in [0, world_size).
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// "local", "gloo", "nccl".
  virtual std::string backend() const = 0;
  /// Sums each tensor element-wise across ranks, in place.
  virtual void all_reduce_sum(std::vector<at::Tensor>& tensors) = 0;
  /// Gathers one tensor of identical shape from every rank: result[r] is rank r's tensor.
  virtual std::vector<at::Tensor> all_gather(const at::Tensor& tensor) = 0;
  /// Copies `root`'s tensors into every rank's, in place.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;
};

/// A world of one rank: every collective is the identity.
std::unique_ptr<Communicator> make_local_communicator();

}  // namespace bertlab
