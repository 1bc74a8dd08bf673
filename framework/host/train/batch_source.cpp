// Indexed batches in a seeded order, and streamed batches, for one rank.

#include "train/batch_source.h"

#include <bertlab/error.h>

#include <random>
#include <utility>

namespace bertlab {

namespace {

/// The global batch order: per epoch a permutation of the training examples drawn from a
/// generator seeded by [experiment] seed, epochs concatenated, consecutive batches of
/// train_batch_size taken from that stream (epochs roll over, as a repeated dataset does).
/// It does not depend on the number of replicas.
class BatchOrder {
 public:
  BatchOrder(int64_t num_examples, int64_t batch_size, uint64_t seed)
      : n_(num_examples), batch_(batch_size), rng_(seed) {}

  /// Skips the first `batches` batches (a resumed run continues where the checkpoint left off).
  void skip(int64_t batches) {
    for (int64_t b = 0; b < batches; ++b) next();
  }

  std::vector<int64_t> next() {
    std::vector<int64_t> out;
    out.reserve(batch_);
    while (static_cast<int64_t>(out.size()) < batch_) {
      if (pos_ == order_.size()) new_epoch();
      out.push_back(order_[pos_++]);
    }
    return out;
  }

 private:
  void new_epoch() {
    order_.resize(n_);
    for (int64_t i = 0; i < n_; ++i) order_[i] = i;
    // Fisher-Yates with our own index draw, so the order is the same with every standard
    // library.
    for (int64_t i = n_ - 1; i > 0; --i) {
      const uint64_t j = rng_() % static_cast<uint64_t>(i + 1);
      std::swap(order_[i], order_[j]);
    }
    pos_ = 0;
  }

  int64_t n_;
  int64_t batch_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  size_t pos_ = 0;
};

/// Micro-batch m of a step is examples [m*B, (m+1)*B) of the step's k*B; this rank takes
/// [r*B/N, (r+1)*B/N) of it.
class IndexedBatches : public BatchSource {
 public:
  IndexedBatches(const Task& task, const BatchSplit& split, uint64_t seed, int64_t first_step)
      : task_(task), split_(split), order_(task.num_train_examples(), split.batch_size, seed) {
    order_.skip(first_step);
  }

  std::vector<Batch> next_step(const c10::Device& device) override {
    const std::vector<int64_t> global = order_.next();
    std::vector<Batch> out;
    for (int64_t m = 0; m < split_.accumulation; ++m) {
      const auto begin = global.begin() + split_.offset(m);
      out.push_back(
          task_.make_train_batch(std::vector<int64_t>(begin, begin + split_.shard()), device));
    }
    return out;
  }

  std::string position() const override { return {}; }

 private:
  const Task& task_;
  BatchSplit split_;
  BatchOrder order_;
};

/// This rank's stream; the task reads its share of each micro-batch.
class StreamedBatches : public BatchSource {
 public:
  StreamedBatches(std::unique_ptr<TrainStream> stream, int64_t accumulation)
      : stream_(std::move(stream)), accumulation_(accumulation) {}

  std::vector<Batch> next_step(const c10::Device& device) override {
    std::vector<Batch> out;
    for (int64_t m = 0; m < accumulation_; ++m) out.push_back(stream_->next(device));
    return out;
  }

  std::string position() const override { return stream_->position(); }

 private:
  std::unique_ptr<TrainStream> stream_;
  int64_t accumulation_;
};

}  // namespace

std::unique_ptr<BatchSource> make_batch_source(const Task& task, const BatchSplit& split,
                                               uint64_t seed, int64_t first_step,
                                               const std::string& position) {
  if (!task.streams_train_data()) {
    return std::make_unique<IndexedBatches>(task, split, seed, first_step);
  }
  auto stream = task.open_train_stream(
      StreamShard{split.micro(), split.rank * split.shard(), split.shard()}, position);
  BERTLAB_CHECK(stream != nullptr, "the task streams its training data but opened no stream");
  return std::make_unique<StreamedBatches>(std::move(stream), split.accumulation);
}

}  // namespace bertlab
