#pragma once
// sparse_allgather: dense gradients averaged as `mirrored` does; each sparse gradient exchanged
// as rows (indices + values) instead of a dense table, unless the rows would cost more than the
// dense table (dense_fallback, docs/gradient-averaging.md, "When sparse rows cost more than the
// dense table").

#include <bertlab/collectives.h>
#include <bertlab/strategy.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bertlab {
struct GradientEntry;
}  // namespace bertlab

namespace bertlab::sparse_allgather {

/// Published implementations this strategy can reproduce, for regression comparisons.
enum class Emulation {
  kNone,                 ///< correct: gather all rows, divide by N, coalesce
  kFirstReplicaIndices,  ///< values averaged element-wise under replica 0's indices
  kNoDivide,             ///< rows of every replica concatenated, not divided by N
  /// PyTorch DDP before pytorch/pytorch#61814's fix: dense gradients divided by N before the
  /// all-reduce, sparse ones after it: rows gathered and summed, then divided by N.
  kDivideAfter,
};

/// When a sparse gradient is densified and all-reduced instead of gathered as rows.
enum class DenseFallback {
  kAuto,   ///< per step and entry, whichever exchange sends fewer values (exact either way)
  kNever,  ///< always rows
};

struct SparseAllgatherOptions {
  double bucket_mb = 25.0;  ///< MiB per dense all-reduce bucket
  /// The type dense buckets and sparse rows' values travel in. With a 16-bit wire each rank's
  /// coalesced rows are divided by N (not with kDivideAfter), cast, gathered, summed in rank order
  /// in the 16-bit type (each addition rounded to it, as an all-reduce in that type adds) and
  /// cast back: mirrored's compression for rows.
  WireFormat wire = WireFormat::kFloat32;
  Emulation emulate = Emulation::kNone;
  bool overlap_backward = false;  ///< dense buckets all-reduced while backward runs
  /// Applies with emulate = kNone only: an emulation reproduces its rows exchange as published.
  DenseFallback dense_fallback = DenseFallback::kAuto;
};

Emulation parse_emulation(const std::string& name);
DenseFallback parse_dense_fallback(const std::string& name);

/// The per-rank cost of exchanging one sparse gradient of `table_rows` (V) rows of `row_width`
/// (H) values over `world` (N) ranks, in values (an index counts as one value; on the wire an
/// index is an int64, two float32 words, which moves the crossover by less than 1/H).
struct ExchangeCost {
  /// Ring all-gather of every rank's rows padded to the largest count: (N−1)·max_rows·(H+1).
  double rows = 0;
  /// Ring all-reduce of the densified table: 2(N−1)/N·V·H.
  double dense = 0;
};
ExchangeCost exchange_cost(int64_t max_rows, int64_t table_rows, int64_t row_width, int world);
/// rows > dense, decided in integers (N·max_rows·(H+1) > 2·V·H) so every rank decides alike.
bool dense_is_cheaper(int64_t max_rows, int64_t table_rows, int64_t row_width, int world);

/// How the last reduce_gradients exchanged one sparse gradient (the bytes are in the
/// communicator's traffic counters: rows under Traffic::kSparse, a densified table under
/// Traffic::kDense, as all_reduce_mean_dense counts it).
struct SparseExchange {
  std::string name;      ///< the parameter, e.g. bert.embeddings.word_embeddings.weight
  bool dense = false;    ///< densified and all-reduced instead of its rows all-gathered
  int64_t max_rows = 0;  ///< the largest row count over the ranks (after local coalescing)
  ExchangeCost cost;     ///< both exchanges' costs under the model above
};

class SparseAllgatherStrategy final : public Strategy {
 public:
  explicit SparseAllgatherStrategy(SparseAllgatherOptions options) : options_(options) {}
  void reduce_gradients(GradientSet& grads, Communicator& comm) override;
  double overlap_bucket_mb() const override {
    return options_.overlap_backward ? options_.bucket_mb : 0.0;
  }

  /// The last step's exchange, for the host's metrics: "rows" or "dense" when every sparse
  /// gradient went that way, "mixed" when they differed, "" when there was none to exchange
  /// (no sparse gradient, one rank, or no step yet).
  std::string last_exchange() const;
  /// The last step's exchange per sparse gradient, in GradientSet order.
  const std::vector<SparseExchange>& last_exchanges() const { return last_exchanges_; }
  /// For metrics.jsonl: sparse_exchanges (sparse gradients exchanged), sparse_densified (of them,
  /// densified and all-reduced: dense_fallback chose the table), sparse_max_rows (the most rows
  /// a rank had, the cost model's nnz).
  std::vector<std::pair<std::string, double>> step_metrics() const override;

 private:
  /// Dense buckets: divided by N, cast to options_.wire, summed, cast back (as mirrored).
  DenseReduceOptions dense_options() const;
  /// Averages one sparse entry over the ranks (as options_.emulate says) and records how.
  void exchange(GradientEntry& entry, Communicator& comm);

  SparseAllgatherOptions options_;
  std::vector<SparseExchange> last_exchanges_;  // [sparse entry of the last step]
};

}  // namespace bertlab::sparse_allgather
