// Gradient collectives: the bucketed dense all-reduce (sum, /N) strategies share, optionally in a
// 16-bit wire format.

#include <ATen/ATen.h>
#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/strategy.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace bertlab {

namespace {

at::ScalarType scalar_type(WireFormat wire) {
  switch (wire) {
    case WireFormat::kFloat16:
      return at::kHalf;
    case WireFormat::kBFloat16:
      return at::kBFloat16;
    case WireFormat::kFloat32:
      break;
  }
  return at::kFloat;
}

/// The ranks' tensors added in rank order, each addition rounded to their type. bfloat16 buckets
/// are all-gathered and summed so: Gloo in libtorch 1.13 has no bfloat16 all-reduce.
at::Tensor sum_in_rank_order(const std::vector<at::Tensor>& parts) {
  at::Tensor sum = parts.front().clone();
  for (size_t r = 1; r < parts.size(); ++r) sum.add_(parts[r]);
  return sum;
}

/// Sum over the ranks divided by `world`, of `flat` (float32), through the wire format.
at::Tensor mean_over_ranks(const at::Tensor& flat, Communicator& comm,
                           const DenseReduceOptions& options) {
  const double world = comm.world_size();
  if (options.wire == WireFormat::kFloat32) {
    std::vector<at::Tensor> buffer{flat};
    comm.all_reduce_sum(buffer);
    return buffer[0].div_(world);
  }
  const at::ScalarType type = scalar_type(options.wire);
  std::vector<at::Tensor> buffer{options.divide_before_cast ? flat.div(world).to(type)
                                                            : flat.to(type)};
  if (type == at::kBFloat16) {
    // The 16 bits travel as float16, which Gloo gathers (a copy, no arithmetic), and are read
    // back as bfloat16.
    std::vector<at::Tensor> parts = comm.all_gather(buffer[0].view(at::kHalf));
    for (auto& part : parts) part = part.view(at::kBFloat16);
    buffer[0] = sum_in_rank_order(parts);
  } else {
    comm.all_reduce_sum(buffer);
  }
  at::Tensor mean = buffer[0].to(flat.scalar_type());
  return options.divide_before_cast ? mean : mean.div_(world);
}

}  // namespace

WireFormat parse_compression(const std::string& value) {
  if (value == "none") return WireFormat::kFloat32;
  if (value == "fp16") return WireFormat::kFloat16;
  if (value == "bf16") return WireFormat::kBFloat16;
  throw ConfigError(
      fmt::format("[strategy] compression = \"{}\": use \"none\", \"fp16\" or \"bf16\"", value));
}

void all_reduce_mean_dense(GradientSet& grads, Communicator& comm,
                           const DenseReduceOptions& options) {
  if (comm.world_size() == 1) return;
  comm.set_traffic(Traffic::kDense);
  const auto bucket_bytes = static_cast<int64_t>(options.bucket_mb * 1024.0 * 1024.0);
  std::vector<GradientEntry*> bucket;
  int64_t bytes = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    std::vector<at::Tensor> flat;
    flat.reserve(bucket.size());
    for (auto* e : bucket) flat.push_back(e->dense.reshape({-1}));
    const at::Tensor mean = mean_over_ranks(at::cat(flat), comm, options);
    int64_t offset = 0;
    for (auto* e : bucket) {
      const int64_t n = e->dense.numel();
      e->dense.copy_(mean.narrow(0, offset, n).view(e->dense.sizes()));
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

StrategyContract dense_reduce_contract(WireFormat wire, int replicas) {
  StrategyContract c;
  if (wire == WireFormat::kFloat32) {
    c.derivation =
        "the float32 sum of the N gradients divided by N: one device's gradient up to the order "
        "of the additions";
    return c;
  }
  const bool half = wire == WireFormat::kFloat16;
  const double u = half ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const double n = std::max(replicas, 1);
  BERTLAB_CHECK(n * u < 1, "dense_reduce_contract: {} replicas is too many for a 16-bit bound",
                replicas);
  c.kind = ContractKind::kBounded;
  c.rtol = n * u / (1 - n * u) + std::ldexp(1.0, -24);
  // Below the smallest normal number a cast rounds to a multiple of the smallest subnormal.
  c.atol = n * (half ? std::ldexp(1.0, -25) : std::ldexp(1.0, -134)) * 2;
  c.derivation = fmt::format(
      "each rank's g/N (float32, 2^-24) cast to {} (unit roundoff u = 2^-{}) and N − 1 {} "
      "additions: |error| <= γ_N·mean|g| with γ_N = N·u/(1 − N·u) (Higham, Accuracy and "
      "Stability of Numerical Algorithms, §4.2), plus N times the format's subnormal spacing; "
      "only while no partial sum overflows ({})",
      half ? "float16" : "bfloat16", half ? 11 : 8, half ? "float16" : "bfloat16",
      half ? "65504" : "3.4e38");
  return c;
}

void all_reduce_mean_dense(GradientSet& grads, Communicator& comm, double bucket_mb) {
  DenseReduceOptions options;
  options.bucket_mb = bucket_mb;
  all_reduce_mean_dense(grads, comm, options);
}

}  // namespace bertlab
