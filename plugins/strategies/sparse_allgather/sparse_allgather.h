#pragma once
// sparse_allgather: dense gradients averaged as `mirrored` does; each sparse gradient exchanged
// as rows (indices + values) instead of a dense table.

#include <bertlab/strategy.h>

#include <string>

namespace bertlab::sparse_allgather {

/// Published implementations this strategy can reproduce, for regression comparisons.
enum class Emulation {
  kNone,                 ///< correct: gather all rows, divide by N, coalesce
  kFirstReplicaIndices,  ///< values averaged element-wise under replica 0's indices
  kNoDivide,             ///< rows of every replica concatenated, not divided by N
};

struct SparseAllgatherOptions {
  double bucket_mb = 25.0;  ///< MiB per dense all-reduce bucket
  Emulation emulate = Emulation::kNone;
  bool overlap_backward = false;  ///< dense buckets all-reduced while backward runs
};

Emulation parse_emulation(const std::string& name);

class SparseAllgatherStrategy final : public Strategy {
 public:
  explicit SparseAllgatherStrategy(SparseAllgatherOptions options) : options_(options) {}
  void reduce_gradients(GradientSet& grads, Communicator& comm) override;
  double overlap_bucket_mb() const override {
    return options_.overlap_backward ? options_.bucket_mb : 0.0;
  }

 private:
  SparseAllgatherOptions options_;
};

}  // namespace bertlab::sparse_allgather
