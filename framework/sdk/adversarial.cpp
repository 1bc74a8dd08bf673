// Per-example norms, ascent steps, projections and random starts of adversarial training.

#include <ATen/ATen.h>
#include <bertlab/adversarial.h>
#include <bertlab/error.h>

#include <vector>

namespace bertlab {

namespace {

/// [examples, 1, ..., 1] for g's rank.
std::vector<int64_t> per_example_shape(const at::Tensor& g) {
  std::vector<int64_t> shape(static_cast<size_t>(g.dim()), 1);
  shape[0] = g.size(0);
  return shape;
}

}  // namespace

at::Tensor perturbation_norms(const at::Tensor& g, PerturbationNorm norm, NormScope scope) {
  BERTLAB_CHECK(g.dim() >= 1 && g.size(0) >= 1, "perturbation_norms: no examples");
  const at::Tensor flat =
      scope == NormScope::kExample ? g.reshape({g.size(0), -1}) : g.reshape({1, -1});
  at::Tensor norms = norm == PerturbationNorm::kL2 ? flat.norm(2, {1}) : flat.abs().amax({1});
  norms = norms.clamp_min(1e-8);
  if (scope == NormScope::kBatch) norms = norms.expand({g.size(0)});
  return norms.reshape(per_example_shape(g));
}

at::Tensor ascent_step(const at::Tensor& delta, const at::Tensor& g, double alpha,
                       PerturbationNorm norm, NormScope scope) {
  return delta + alpha * g / perturbation_norms(g, norm, scope);
}

at::Tensor project_perturbation(const at::Tensor& delta, PerturbationNorm norm, double epsilon) {
  if (epsilon <= 0) return delta;
  if (norm == PerturbationNorm::kLinf) return delta.clamp(-epsilon, epsilon);
  const at::Tensor norms =
      delta.reshape({delta.size(0), -1}).norm(2, {1}).reshape(per_example_shape(delta));
  // An example beyond the ball is rescaled onto it; one inside is left as it is.
  const at::Tensor factor = at::where(norms > epsilon, epsilon / norms, at::ones_like(norms));
  return delta * factor;
}

at::Tensor random_perturbation(const DropoutKey& key, c10::IntArrayRef shape,
                               const at::Tensor& input_mask, PerturbationNorm norm,
                               double magnitude) {
  BERTLAB_CHECK(shape.size() == 3 && input_mask.dim() == 2 && input_mask.size(0) == shape[0] &&
                    input_mask.size(1) == shape[1],
                "random_perturbation: shape [{}] and a mask of {} dimensions",
                fmt::join(shape, ", "), input_mask.dim());
  const at::Tensor mask = input_mask.to(at::kFloat).unsqueeze(2);
  if (norm == PerturbationNorm::kLinf) {
    const at::Tensor u =
        per_example_uniform(key, kAdversarialInitSite, shape, -magnitude, magnitude);
    return u.to(mask.device()) * mask;
  }
  const at::Tensor u = per_example_uniform(key, kAdversarialInitSite, shape, -1.0, 1.0);
  // Each example's magnitude over its real tokens' elements: magnitude / √(length · hidden).
  const at::Tensor dims = input_mask.to(at::kFloat).sum(1) * static_cast<double>(shape[2]);
  const at::Tensor scale = (magnitude / dims.clamp_min(1.0).sqrt()).reshape({shape[0], 1, 1});
  return u.to(mask.device()) * mask * scale;
}

}  // namespace bertlab
