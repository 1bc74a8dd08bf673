#include <ATen/ATen.h>
#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/grad.h>

namespace bertlab {

void all_reduce_mean_dense(GradientSet& grads, Communicator& comm, double bucket_mb) {
  const int world = comm.world_size();
  if (world == 1) return;
  comm.set_traffic(Traffic::kDense);
  const auto bucket_bytes = static_cast<int64_t>(bucket_mb * 1024.0 * 1024.0);
  std::vector<GradientEntry*> bucket;
  int64_t bytes = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    std::vector<at::Tensor> flat;
    flat.reserve(bucket.size());
    for (auto* e : bucket) flat.push_back(e->dense.reshape({-1}));
    std::vector<at::Tensor> buffer{at::cat(flat)};
    comm.all_reduce_sum(buffer);
    buffer[0].div_(static_cast<double>(world));
    int64_t offset = 0;
    for (auto* e : bucket) {
      const int64_t n = e->dense.numel();
      e->dense.copy_(buffer[0].narrow(0, offset, n).view(e->dense.sizes()));
      offset += n;
    }
    bucket.clear();
    bytes = 0;
  };
  for (auto& entry : grads.entries()) {
    if (entry.is_sparse() || entry.averaged) continue;
    const int64_t entry_bytes =
        entry.dense.numel() * static_cast<int64_t>(entry.dense.element_size());
    if (!bucket.empty() && bytes + entry_bytes > bucket_bytes) flush();
    bucket.push_back(&entry);
    bytes += entry_bytes;
  }
  flush();
  comm.set_traffic(Traffic::kOther);
}

}  // namespace bertlab
