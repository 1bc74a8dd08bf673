// gradcheck --perturb-ulp: see ulp_perturbation.h.

#include "train/ulp_perturbation.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include <limits>

namespace bertlab {

void perturb_by_one_ulp(const std::vector<std::shared_ptr<torch::nn::Module>>& models,
                        uint64_t seed) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (const auto& model : models) {
    at::Generator generator = at::detail::createCPUGenerator(seed);
    at::NoGradGuard no_grad;
    for (auto& p : model->named_parameters(/*recurse=*/true)) {
      at::Tensor w = p.value();
      if (!at::isFloatingType(w.scalar_type())) continue;
      // Drawn on the CPU in float64 whatever the parameter's device, so the directions are the
      // same on every device and dtype.
      const at::Tensor up =
          at::bernoulli(at::full(w.sizes(), 0.5, at::kDouble), generator).to(w.device()) > 0.5;
      const at::Tensor toward = at::where(up, at::full_like(w, kInf), at::full_like(w, -kInf));
      w.copy_(at::where(w == 0, w, at::nextafter(w, toward)));
    }
  }
}

}  // namespace bertlab
