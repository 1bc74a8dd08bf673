#include "sparse_allgather.h"

#include <ATen/ATen.h>
#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>

namespace bertlab::sparse_allgather {

Emulation parse_emulation(const std::string& name) {
  if (name == "none") return Emulation::kNone;
  if (name == "first_replica_indices") return Emulation::kFirstReplicaIndices;
  if (name == "no_divide") return Emulation::kNoDivide;
  throw Error(fmt::format("sparse_allgather.emulate: unknown emulation '{}'", name));
}

namespace {

/// Every rank's rows of one sparse entry, concatenated in rank order: sizes are exchanged
/// first, then indices and values padded to the largest count are all-gathered.
void gather_rows(GradientEntry& entry, Communicator& comm) {
  const int64_t local = entry.indices.size(0);
  const auto counts = comm.all_gather(at::tensor({local}, at::kLong));
  int64_t largest = 0;
  for (const auto& c : counts) largest = std::max(largest, c.item<int64_t>());
  auto pad_rows = [largest](const at::Tensor& t) {
    if (t.size(0) == largest) return t.contiguous();
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    shape[0] = largest - t.size(0);
    return at::cat({t, at::zeros(shape, t.options())});
  };
  const auto indices = comm.all_gather(pad_rows(entry.indices));
  const auto values = comm.all_gather(pad_rows(entry.values));
  std::vector<at::Tensor> all_indices, all_values;
  for (size_t r = 0; r < counts.size(); ++r) {
    const int64_t n = counts[r].item<int64_t>();
    all_indices.push_back(indices[r].narrow(0, 0, n));
    all_values.push_back(values[r].narrow(0, 0, n));
  }
  entry.indices = at::cat(all_indices);
  entry.values = at::cat(all_values);
}

/// The bug: the values tensor is all-reduced as if it were dense, and every replica keeps
/// replica 0's indices. Right only when all replicas looked up the same tokens in the same
/// order. Like that implementation, it needs the same number of rows on every rank (which
/// holds for uncoalesced embedding gradients of equal-size shards padded to one length), and
/// otherwise fails as its all-reduce would.
void average_under_first_replica_indices(GradientEntry& entry, Communicator& comm) {
  const auto counts = comm.all_gather(at::tensor({entry.indices.size(0)}, at::kLong));
  for (size_t r = 0; r < counts.size(); ++r) {
    BERTLAB_CHECK(counts[r].item<int64_t>() == entry.indices.size(0),
                  "sparse_allgather.emulate = \"first_replica_indices\": {} has {} rows on rank "
                  "{} and {} on rank {}; that implementation's all-reduce needs equal sizes",
                  entry.name, entry.indices.size(0), comm.rank(), counts[r].item<int64_t>(), r);
  }
  std::vector<at::Tensor> values{entry.values.contiguous().clone()};
  comm.all_reduce_sum(values);
  entry.values = values[0].div_(static_cast<double>(comm.world_size()));
  std::vector<at::Tensor> indices{entry.indices.contiguous().clone()};
  comm.broadcast(indices, 0);
  entry.indices = indices[0];
}

}  // namespace

void SparseAllgatherStrategy::reduce_gradients(GradientSet& grads, Communicator& comm) {
  all_reduce_mean_dense(grads, comm, options_.bucket_mb);
  if (comm.world_size() == 1) return;
  const double n = comm.world_size();
  comm.set_traffic(Traffic::kSparse);
  for (auto& entry : grads.entries()) {
    if (!entry.is_sparse()) continue;
    switch (options_.emulate) {
      case Emulation::kNone: {
        GradientSet one;
        one.add(entry);
        one.coalesce();  // fewer rows to send; duplicates summed locally
        entry = one.entries().front();
        gather_rows(entry, comm);
        entry.values = entry.values / n;
        one.entries().front() = entry;
        one.coalesce();
        entry = one.entries().front();
        break;
      }
      case Emulation::kNoDivide:
        // The concatenation as that implementation left it: every replica's rows, summed by
        // dense() into N times the mean.
        gather_rows(entry, comm);
        break;
      case Emulation::kFirstReplicaIndices:
        average_under_first_replica_indices(entry, comm);
        break;
    }
  }
  comm.set_traffic(Traffic::kOther);
}

}  // namespace bertlab::sparse_allgather
