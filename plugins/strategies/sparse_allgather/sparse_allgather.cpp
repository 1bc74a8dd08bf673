#include "sparse_allgather.h"

#include <ATen/ATen.h>
#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

namespace bertlab::sparse_allgather {

Emulation parse_emulation(const std::string& name) {
  if (name == "none") return Emulation::kNone;
  if (name == "first_replica_indices") return Emulation::kFirstReplicaIndices;
  if (name == "no_divide") return Emulation::kNoDivide;
  if (name == "divide_after") return Emulation::kDivideAfter;
  throw Error(fmt::format("sparse_allgather.emulate: unknown emulation '{}'", name));
}

DenseFallback parse_dense_fallback(const std::string& name) {
  if (name == "auto") return DenseFallback::kAuto;
  if (name == "never") return DenseFallback::kNever;
  throw Error(fmt::format(
      "sparse_allgather.dense_fallback: unknown value '{}'; use \"auto\" or \"never\"", name));
}

ExchangeCost exchange_cost(int64_t max_rows, int64_t table_rows, int64_t row_width, int world) {
  const double n = world;
  ExchangeCost cost;
  cost.rows = (n - 1) * static_cast<double>(max_rows) * static_cast<double>(row_width + 1);
  cost.dense = 2 * (n - 1) / n * static_cast<double>(table_rows) * static_cast<double>(row_width);
  return cost;
}

bool dense_is_cheaper(int64_t max_rows, int64_t table_rows, int64_t row_width, int world) {
  // (N−1)·max_rows·(H+1) > 2(N−1)/N·V·H, multiplied by N/(N−1) (N >= 2): integers, so no
  // rounding can make two ranks decide differently.
  return world > 1 && int64_t{world} * max_rows * (row_width + 1) > 2 * table_rows * row_width;
}

std::string SparseAllgatherStrategy::last_exchange() const {
  if (last_exchanges_.empty()) return "";
  const bool dense = last_exchanges_.front().dense;
  for (const auto& e : last_exchanges_) {
    if (e.dense != dense) return "mixed";
  }
  return dense ? "dense" : "rows";
}

namespace {

/// Values per row: the product of the parameter's dimensions after the first.
int64_t row_width(const GradientEntry& entry) {
  return std::accumulate(entry.shape.begin() + 1, entry.shape.end(), int64_t{1},
                         std::multiplies<>());
}

/// Duplicate rows of one sparse entry summed, indices sorted.
void coalesce(GradientEntry& entry) {
  GradientSet one;
  one.add(std::move(entry));
  one.coalesce();
  entry = std::move(one.entries().front());
}

/// Every rank's row count of one sparse entry: result[r] is rank r's.
std::vector<int64_t> gather_counts(const GradientEntry& entry, Communicator& comm) {
  const auto gathered = comm.all_gather(at::tensor({entry.indices.size(0)}, at::kLong));
  std::vector<int64_t> counts;
  counts.reserve(gathered.size());
  for (const auto& c : gathered) counts.push_back(c.item<int64_t>());
  return counts;
}

/// Every rank's rows of one sparse entry, concatenated in rank order: indices and values padded
/// to the largest of `counts` (from gather_counts) are all-gathered.
void gather_rows(GradientEntry& entry, Communicator& comm, const std::vector<int64_t>& counts) {
  const int64_t largest = *std::max_element(counts.begin(), counts.end());
  auto pad_rows = [largest](const at::Tensor& t) {
    if (t.size(0) == largest) return t.contiguous();
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    shape[0] = largest - t.size(0);
    return at::cat({t, at::zeros(shape, t.options())});
  };
  const auto indices = comm.all_gather(pad_rows(entry.indices));
  // bfloat16 travels as float16's bits (Gloo gathers a copy; libtorch 1.13's has no bfloat16).
  const bool bf16 = entry.values.scalar_type() == at::kBFloat16;
  const auto values =
      comm.all_gather(bf16 ? pad_rows(entry.values).view(at::kHalf) : pad_rows(entry.values));
  std::vector<at::Tensor> all_indices, all_values;
  for (size_t r = 0; r < counts.size(); ++r) {
    all_indices.push_back(indices[r].narrow(0, 0, counts[r]));
    const at::Tensor v = values[r].narrow(0, 0, counts[r]);
    all_values.push_back(bf16 ? v.view(at::kBFloat16) : v);
  }
  entry.indices = at::cat(all_indices);
  entry.values = at::cat(all_values);
}

/// The rows of every rank, gathered in the 16-bit `wire` type and summed in rank order in it:
/// each rank's coalesced rows are divided by N first (`divide_first`) or the sum after (PyTorch
/// #61814's sparse path). A rank's coalesced rows name each table row at most once, so each
/// element gets one addition per rank: done in float32 and rounded to the wire type, which is
/// the correctly rounded 16-bit sum (two 16-bit values add exactly in float32 unless one is far
/// below the other's half ulp), as at::add_ on 16-bit CPU tensors computes it.
void sum_rows_in_wire(GradientEntry& entry, Communicator& comm, const std::vector<int64_t>& counts,
                      WireFormat wire, bool divide_first) {
  const double n = comm.world_size();
  const at::ScalarType type = wire == WireFormat::kFloat16 ? at::kHalf : at::kBFloat16;
  entry.values = (divide_first ? entry.values / n : entry.values).to(type);
  gather_rows(entry, comm, counts);
  const auto [rows, inverse, unused] =
      at::_unique2(entry.indices, /*sorted=*/true, /*return_inverse=*/true,
                   /*return_counts=*/false);
  std::vector<int64_t> shape(entry.values.sizes().begin(), entry.values.sizes().end());
  shape[0] = rows.size(0);
  at::Tensor sum = at::zeros(shape, at::kFloat);
  int64_t offset = 0;
  for (const int64_t count : counts) {
    sum.index_add_(0, inverse.narrow(0, offset, count),
                   entry.values.narrow(0, offset, count).to(at::kFloat));
    sum = sum.to(type).to(at::kFloat);
    offset += count;
  }
  entry.indices = rows;
  entry.values = divide_first ? sum : sum.div_(n);
}

/// The entry densified and averaged by all_reduce_mean_dense (sum, /N; counted as
/// Traffic::kDense): the same mean as the rows, up to the order of the additions.
void average_densely(GradientEntry& entry, Communicator& comm, const DenseReduceOptions& options) {
  GradientSet one;
  one.add(std::move(entry));
  one.densify();
  all_reduce_mean_dense(one, comm, options);
  entry = std::move(one.entries().front());
}

/// The bug: the values tensor is all-reduced as if it were dense, and every replica keeps
/// replica 0's indices. Right only when all replicas looked up the same tokens in the same
/// order. Like that implementation, it needs the same number of rows on every rank (which
/// holds for uncoalesced embedding gradients of equal-size shards padded to one length), and
/// otherwise fails as its all-reduce would.
void average_under_first_replica_indices(GradientEntry& entry, Communicator& comm,
                                         const std::vector<int64_t>& counts) {
  for (size_t r = 0; r < counts.size(); ++r) {
    BERTLAB_CHECK(counts[r] == entry.indices.size(0),
                  "sparse_allgather.emulate = \"first_replica_indices\": {} has {} rows on rank "
                  "{} and {} on rank {}; that implementation's all-reduce needs equal sizes",
                  entry.name, entry.indices.size(0), comm.rank(), counts[r], r);
  }
  std::vector<at::Tensor> values{entry.values.contiguous().clone()};
  comm.all_reduce_sum(values);
  entry.values = values[0].div_(static_cast<double>(comm.world_size()));
  std::vector<at::Tensor> indices{entry.indices.contiguous().clone()};
  comm.broadcast(indices, 0);
  entry.indices = indices[0];
}

}  // namespace

void SparseAllgatherStrategy::exchange(GradientEntry& entry, Communicator& comm) {
  const int world = comm.world_size();
  const double n = world;
  // The correct path and divide_after send each rank's coalesced rows: fewer to send.
  const bool coalesced =
      options_.emulate == Emulation::kNone || options_.emulate == Emulation::kDivideAfter;
  if (coalesced) coalesce(entry);
  const std::vector<int64_t> counts = gather_counts(entry, comm);
  SparseExchange record;
  record.name = entry.name;
  record.max_rows = *std::max_element(counts.begin(), counts.end());
  record.cost = exchange_cost(record.max_rows, entry.shape.at(0), row_width(entry), world);
  // Every rank holds the same counts, so every rank takes the same branch.
  record.dense = options_.emulate == Emulation::kNone &&
                 options_.dense_fallback == DenseFallback::kAuto &&
                 dense_is_cheaper(record.max_rows, entry.shape.at(0), row_width(entry), world);
  switch (options_.emulate) {
    case Emulation::kNone:
      if (record.dense) {
        average_densely(entry, comm, dense_options());
        comm.set_traffic(Traffic::kSparse);  // all_reduce_mean_dense leaves it at kOther
        break;
      }
      if (options_.wire != WireFormat::kFloat32) {
        sum_rows_in_wire(entry, comm, counts, options_.wire, /*divide_first=*/true);
        break;
      }
      gather_rows(entry, comm, counts);
      entry.values = entry.values / n;  // each rank's share divided, then summed
      coalesce(entry);
      break;
    case Emulation::kDivideAfter:
      // Summed first, divided after. With N a power of two the division is exact, so this is
      // bitwise the default's result unless the sum overflows (a mean above 3.4e38/N, float32's
      // largest over N, becomes inf) or a share g/N falls below the smallest normal number
      // (2^-126), where the default rounds each share and this only the mean; for other N an
      // element may differ by float32 rounding (a few 2^-24 relative). The same holds in
      // bfloat16 (float32's range); in float16 the sum overflows past 65504, N times sooner.
      if (options_.wire != WireFormat::kFloat32) {
        sum_rows_in_wire(entry, comm, counts, options_.wire, /*divide_first=*/false);
        break;
      }
      gather_rows(entry, comm, counts);
      coalesce(entry);
      entry.values = entry.values / n;
      break;
    case Emulation::kNoDivide:
      // The concatenation as that implementation left it: every replica's rows, summed by
      // dense() into N times the mean.
      gather_rows(entry, comm, counts);
      break;
    case Emulation::kFirstReplicaIndices:
      average_under_first_replica_indices(entry, comm, counts);
      break;
  }
  last_exchanges_.push_back(std::move(record));
}

DenseReduceOptions SparseAllgatherStrategy::dense_options() const {
  DenseReduceOptions dense;
  dense.bucket_mb = options_.bucket_mb;
  dense.wire = options_.wire;
  return dense;
}

std::vector<std::pair<std::string, double>> SparseAllgatherStrategy::step_metrics() const {
  if (last_exchanges_.empty()) return {};
  double densified = 0, max_rows = 0;
  for (const auto& e : last_exchanges_) {
    if (e.dense) ++densified;
    max_rows = std::max(max_rows, static_cast<double>(e.max_rows));
  }
  return {{"sparse_exchanges", static_cast<double>(last_exchanges_.size())},
          {"sparse_densified", densified},
          {"sparse_max_rows", max_rows}};
}

void SparseAllgatherStrategy::reduce_gradients(GradientSet& grads, Communicator& comm) {
  last_exchanges_.clear();
  all_reduce_mean_dense(grads, comm, dense_options());
  if (comm.world_size() == 1) return;
  comm.set_traffic(Traffic::kSparse);
  for (auto& entry : grads.entries()) {
    if (entry.is_sparse()) exchange(entry, comm);
  }
  comm.set_traffic(Traffic::kOther);
}

}  // namespace bertlab::sparse_allgather
