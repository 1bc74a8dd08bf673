#pragma once
// Where a rank's batches come from, step by step: the task's indexed examples in a seeded order
// (every replica count sees the same global batches), or the task's stream (pretraining files),
// behind one interface.

#include <bertlab/task.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bertlab {

/// How a step's global batch is split: k micro-batches of `micro` examples, each shared by
/// `world` ranks (`shard` examples each).
struct BatchSplit {
  int64_t batch_size = 0;    ///< examples per optimizer step, all micro-batches
  int64_t accumulation = 1;  ///< micro-batches per step
  int world = 1;
  int rank = 0;
  int64_t micro() const { return batch_size / accumulation; }
  int64_t shard() const { return micro() / world; }
  /// The position in the step's global batch of this rank's part of micro-batch `m`.
  int64_t offset(int64_t m) const { return m * micro() + rank * shard(); }
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// This rank's micro-batches of the next step, on `device`.
  virtual std::vector<Batch> next_step(const c10::Device& device) = 0;
  /// Where a resumed run continues (a stream's position; empty for indexed data, which the
  /// step number places).
  virtual std::string position() const = 0;
};

/// The task's source of batches for this rank: its stream when it streams (from `position`),
/// else its indexed examples in the order of `seed`, after `first_step` steps.
std::unique_ptr<BatchSource> make_batch_source(const Task& task, const BatchSplit& split,
                                               uint64_t seed, int64_t first_step,
                                               const std::string& position);

}  // namespace bertlab
