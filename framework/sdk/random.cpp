#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <bertlab/error.h>
#include <bertlab/random.h>

#include <cmath>
#include <utility>

namespace bertlab {

namespace {
thread_local ReplicaGeneratorScope* current_scope = nullptr;
thread_local PerExampleDropoutScope* current_dropout_scope = nullptr;
}  // namespace

PerExampleDropoutScope::PerExampleDropoutScope(const DropoutKey& key)
    : key_(key), previous_(current_dropout_scope) {
  BERTLAB_CHECK(key.examples >= 1 && key.first_example >= 0 && key.step >= 0,
                "PerExampleDropoutScope: examples {} from {} at step {}", key.examples,
                key.first_example, key.step);
  current_dropout_scope = this;
}

PerExampleDropoutScope::~PerExampleDropoutScope() { current_dropout_scope = previous_; }

PerExampleDropoutScope* per_example_dropout_scope() { return current_dropout_scope; }

namespace {

/// Fills a float32 CPU tensor of `shape`, example by example, with value(draw) of each element's
/// 32-bit Philox draw: counter words (block of 4 elements, site) in the offset, (example, step)
/// in the subsequence.
template <typename Value>
at::Tensor per_example_draws(const DropoutKey& key, int64_t site, c10::IntArrayRef shape,
                             const Value& value) {
  // The first dimension is the examples, or examples-major (BERT's [batch * heads, ...]): each
  // example owns a contiguous block.
  BERTLAB_CHECK(!shape.empty() && shape[0] % key.examples == 0,
                "dropout site {}: the tensor's first dimension {} is not a multiple of the "
                "batch's {} examples",
                site, shape.empty() ? 0 : shape[0], key.examples);
  BERTLAB_CHECK(site >= 0 && site < (int64_t{1} << 32), "dropout site {} out of range", site);
  at::Tensor out = at::empty(shape, at::kFloat);
  const int64_t per_example = key.examples == 0 ? 0 : out.numel() / key.examples;
  float* data = out.data_ptr<float>();
  at::parallel_for(0, key.examples, 1, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      const uint64_t example = static_cast<uint64_t>(key.first_example + e);
      const uint64_t subsequence =
          (static_cast<uint64_t>(key.step) << 32) | (example & 0xffffffffu);
      at::philox_engine engine(key.seed, subsequence, static_cast<uint64_t>(site) << 32);
      float* row = data + e * per_example;
      for (int64_t j = 0; j < per_example; ++j) row[j] = value(static_cast<uint64_t>(engine()));
    }
  });
  return out;
}

}  // namespace

at::Tensor per_example_dropout_mask(const DropoutKey& key, int64_t site, c10::IntArrayRef shape,
                                    double p) {
  BERTLAB_CHECK(p >= 0.0 && p < 1.0, "dropout probability {} is not in [0, 1)", p);
  // Keep an element when its 32-bit draw is below (1 - p) * 2^32.
  const auto threshold = static_cast<uint64_t>(std::llround((1.0 - p) * 4294967296.0));
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  return per_example_draws(key, site, shape,
                           [&](uint64_t draw) { return draw < threshold ? scale : 0.0f; });
}

at::Tensor per_example_uniform(const DropoutKey& key, int64_t site, c10::IntArrayRef shape,
                               double low, double high) {
  BERTLAB_CHECK(low <= high, "per_example_uniform: low {} above high {}", low, high);
  const double width = (high - low) / 4294967296.0;
  return per_example_draws(key, site, shape, [&](uint64_t draw) {
    return static_cast<float>(low + width * static_cast<double>(draw));
  });
}

ReplicaGeneratorScope::ReplicaGeneratorScope(at::Generator generator)
    : generator_(std::move(generator)), previous_(current_scope) {
  BERTLAB_CHECK(generator_.defined() && generator_.device().is_cpu(),
                "ReplicaGeneratorScope: a CPU generator is needed");
  current_scope = this;
}

ReplicaGeneratorScope::~ReplicaGeneratorScope() { current_scope = previous_; }

at::Generator replica_generator() {
  return current_scope != nullptr ? current_scope->generator_
                                  : at::detail::getDefaultCPUGenerator();
}

namespace {

constexpr int64_t kLow32 = 0xffffffffLL;

/// The 32-bit halves of a * b for a, b < 2^32 held in int64 tensors, without overflowing int64:
/// b is split into 16-bit halves.
std::pair<at::Tensor, at::Tensor> mulhilo32(int64_t a, const at::Tensor& b) {
  const at::Tensor high_part = b.bitwise_right_shift(16).mul(a);  // < 2^48
  const at::Tensor low_part = b.bitwise_and(0xffff).mul(a);       // < 2^48
  const at::Tensor sum = high_part.bitwise_and(0xffff).bitwise_left_shift(16).add(low_part);
  at::Tensor hi =
      high_part.bitwise_right_shift(16).add(sum.bitwise_right_shift(32)).bitwise_and(kLow32);
  at::Tensor lo = sum.bitwise_and(kLow32);
  return {std::move(hi), std::move(lo)};
}

}  // namespace

at::Tensor per_example_dropout_mask_by_tensor_ops(const DropoutKey& key, int64_t site,
                                                  c10::IntArrayRef shape, double p,
                                                  c10::Device device) {
  BERTLAB_CHECK(p >= 0.0 && p < 1.0, "dropout probability {} is not in [0, 1)", p);
  BERTLAB_CHECK(!shape.empty() && shape[0] % key.examples == 0,
                "dropout site {}: the tensor's first dimension {} is not a multiple of the "
                "batch's {} examples",
                site, shape.empty() ? 0 : shape[0], key.examples);
  BERTLAB_CHECK(site >= 0 && site < (int64_t{1} << 32), "dropout site {} out of range", site);
  const int64_t numel = c10::multiply_integers(shape);
  const int64_t per_example = numel / key.examples;
  const int64_t blocks = (per_example + 3) / 4;
  const auto options = at::TensorOptions().dtype(at::kLong).device(device);
  // Philox 4x32-10 as at::philox_engine: counter (block, site, example, step), key (seed).
  at::Tensor c0 = at::arange(blocks, options).expand({key.examples, blocks});
  at::Tensor c1 = at::full({key.examples, blocks}, site & kLow32, options);
  at::Tensor c2 = at::arange(key.first_example, key.first_example + key.examples, options)
                      .bitwise_and(kLow32)
                      .unsqueeze(1)
                      .expand({key.examples, blocks});
  at::Tensor c3 = at::full({key.examples, blocks}, key.step & kLow32, options);
  uint32_t k0 = static_cast<uint32_t>(key.seed);
  uint32_t k1 = static_cast<uint32_t>(key.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    auto [hi0, lo0] = mulhilo32(0xD2511F53LL, c0);
    auto [hi1, lo1] = mulhilo32(0xCD9E8D57LL, c2);
    at::Tensor n0 = hi1.bitwise_xor(c1).bitwise_xor(static_cast<int64_t>(k0));
    at::Tensor n2 = hi0.bitwise_xor(c3).bitwise_xor(static_cast<int64_t>(k1));
    c0 = std::move(n0);
    c1 = std::move(lo1);
    c2 = std::move(n2);
    c3 = std::move(lo0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Output i of block b is element 4b + i of the example.
  const at::Tensor draws =
      at::stack({c0, c1, c2, c3}, 2).reshape({key.examples, blocks * 4}).narrow(1, 0, per_example);
  const auto threshold = static_cast<int64_t>(std::llround((1.0 - p) * 4294967296.0));
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  return draws.lt(threshold).to(at::kFloat).mul_(scale).reshape(shape);
}

at::Tensor dropout(const at::Tensor& x, double p, bool train) {
  if (!train) return x;
  // Every call in training is a site, drawn or not, so the numbering does not depend on p.
  PerExampleDropoutScope* scope = per_example_dropout_scope();
  const int64_t site = scope != nullptr ? scope->next_site() : -1;
  if (p == 0.0 || x.numel() == 0) return x;
  if (scope != nullptr) {
    BERTLAB_CHECK(p > 0.0 && p <= 1.0, "dropout probability {} is not in [0, 1]", p);
    if (p == 1.0) return x * at::zeros({}, x.options());
    const at::Tensor mask =
        x.device().is_cpu()
            ? per_example_dropout_mask(scope->key(), site, x.sizes(), p)
            : per_example_dropout_mask_by_tensor_ops(scope->key(), site, x.sizes(), p, x.device());
    return x * mask.to(x.scalar_type());
  }
  if (!x.device().is_cpu()) return at::dropout(x, p, /*train=*/true);
  BERTLAB_CHECK(p > 0.0 && p <= 1.0, "dropout probability {} is not in [0, 1]", p);
  if (p == 1.0) return x * at::zeros({}, x.options());
  // As ATen's CPU dropout: a Bernoulli(1 - p) mask scaled by 1 / (1 - p), multiplied in (the
  // mask is a constant to autograd).
  at::Tensor noise = at::empty_like(x, at::MemoryFormat::Contiguous);
  noise.bernoulli_(1.0 - p, replica_generator());
  noise.div_(1.0 - p);
  return x * noise;
}

}  // namespace bertlab
