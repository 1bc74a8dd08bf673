#pragma once
// The small interface strategy code talks to for collectives. A rank is one replica.
// Implementations: a world of one (always available) and c10d process groups.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bertlab {

/// What a collective carries, for the traffic counters.
enum class Traffic { kDense = 0, kSparse = 1, kOther = 2 };

/// A collective started by an `_async` call: its tensors must stay untouched until wait().
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  /// Blocks until the collective has completed on this rank; fails as the blocking call would
  /// (after the communicator's timeout, naming the rank and the collective).
  virtual void wait() = 0;
};

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
  /// all_reduce_sum started in the background (the host overlaps it with backward); the sums
  /// are in `tensors` once wait() returns. Every rank must start its async collectives in the
  /// same order. The default runs the blocking all_reduce_sum and returns a completed handle.
  virtual std::unique_ptr<PendingCollective> all_reduce_sum_async(std::vector<at::Tensor>& tensors);
  /// Gathers one tensor of identical shape from every rank: result[r] is rank r's tensor.
  virtual std::vector<at::Tensor> all_gather(const at::Tensor& tensor) = 0;
  /// Copies `root`'s tensors into every rank's, in place.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;
  /// Sums a 1-D contiguous `input` of world_size() equal chunks element-wise across ranks and
  /// returns this rank's chunk of the sum (input[rank·chunk, (rank+1)·chunk) summed over the
  /// ranks). The input's elements may be overwritten and the result may be a view of it. The
  /// default all-reduces the whole input in place and returns its chunk: the same result, twice
  /// the bytes of a real reduce-scatter.
  virtual at::Tensor reduce_scatter_sum(const at::Tensor& input);

  /// The class the following collectives are counted under (until the next call).
  void set_traffic(Traffic traffic) { traffic_ = traffic; }
  /// Payload bytes this rank has contributed to collectives of `traffic` since the last reset
  /// (the tensors it passed in; a ring all-reduce moves about 2(N-1)/N of that per rank).
  int64_t traffic_bytes(Traffic traffic) const { return bytes_[static_cast<int>(traffic)]; }
  void reset_traffic() { bytes_[0] = bytes_[1] = bytes_[2] = 0; }

 protected:
  /// Implementations call this with each collective's input size.
  void count_bytes(int64_t bytes) { bytes_[static_cast<int>(traffic_)] += bytes; }

 private:
  Traffic traffic_ = Traffic::kOther;
  int64_t bytes_[3] = {0, 0, 0};
};

/// A world of one rank: every collective is the identity.
std::unique_ptr<Communicator> make_local_communicator();

}  // namespace bertlab
