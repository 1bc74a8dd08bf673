#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <bertlab/error.h>
#include <bertlab/random.h>

namespace bertlab {

namespace {
thread_local ReplicaGeneratorScope* current_scope = nullptr;
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

at::Tensor dropout(const at::Tensor& x, double p, bool train) {
  if (!train || p == 0.0 || x.numel() == 0) return x;
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
