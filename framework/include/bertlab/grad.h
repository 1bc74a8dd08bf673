#pragma once
// GradientSet: the gradients of one replica, as strategies and optimizers consume them.
// Dense parameters carry a dense tensor; the word embedding (with sparse_embeddings) carries
// sparse rows: row indices, which may repeat, and one value row per index. dense() sums
// duplicates, so a sparse entry and its densified form denote the same gradient.

#include <ATen/core/Tensor.h>

#include <cmath>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace bertlab {

/// How the global norm treats sparse rows.
enum class NormMode {
  kCoalesced,    ///< norm of the dense gradient (duplicates summed): the mathematically right one
  kUncoalesced,  ///< norm over the values as stored (TensorFlow's global_norm over IndexedSlices)
};

struct GradientEntry {
  std::string name;            ///< parameter name, e.g. bert.embeddings.word_embeddings.weight
  at::Tensor dense;            ///< [param shape]; undefined when the entry is sparse
  at::Tensor indices;          ///< [nnz] int64 row indices into dim 0 (sparse only)
  at::Tensor values;           ///< [nnz, param.shape[1:]...] (sparse only)
  std::vector<int64_t> shape;  ///< full parameter shape
  /// Already the mean over the ranks: the host averaged it while backward ran (a strategy's
  /// overlap_bucket_mb()); all_reduce_mean_dense leaves it alone.
  bool averaged = false;

  bool is_sparse() const { return !dense.defined(); }
  /// The dense form, duplicates summed (a new tensor for sparse entries).
  at::Tensor to_dense() const;
};

class GradientSet {
 public:
  GradientSet() = default;
  /// Collects `module`'s parameter gradients in named_parameters() order. A sparse COO grad
  /// becomes a sparse entry (uncoalesced, as autograd left it); a parameter without a grad
  /// (unused by the loss) gets no entry. Tensors are shared with the module's .grad(), not copied.
  static GradientSet from_module(const torch::nn::Module& module);

  std::vector<GradientEntry>& entries() { return entries_; }
  const std::vector<GradientEntry>& entries() const { return entries_; }
  /// The entry for `name`, or nullptr.
  GradientEntry* find(const std::string& name);
  void add(GradientEntry entry) { entries_.push_back(std::move(entry)); }

  /// Sparse entries: duplicates summed, indices sorted ascending.
  void coalesce();
  /// Sparse entries become dense.
  void densify();
  /// sqrt(sum of squares) over all entries (see NormMode for sparse rows); for a shard, the
  /// whole gradient's (set_shard_of).
  double global_norm(NormMode mode = NormMode::kCoalesced) const;
  /// A strategy that leaves each rank a shard of the averaged gradient (zero1) states the whole
  /// gradient's sum of squares, the same on every rank, so that global_norm() and clipping see
  /// the whole gradient and every rank clips by the same factor. scale() keeps it current.
  void set_shard_of(double total_squares) { shard_total_squares_ = total_squares; }
  /// Whether this set is a shard (set_shard_of was called).
  bool is_shard() const { return shard_total_squares_ >= 0.0 || std::isnan(shard_total_squares_); }
  /// Multiplies every gradient by `factor` in place.
  void scale(double factor);
  /// As Google's clip_by_global_norm: if norm > clip_norm, scale by clip_norm / norm.
  /// Returns the norm before clipping.
  double clip_by_global_norm(double clip_norm, NormMode mode = NormMode::kCoalesced);

 private:
  std::vector<GradientEntry> entries_;
  double shard_total_squares_ = -1.0;  ///< < 0: not a shard
};

}  // namespace bertlab
