#pragma once
// Adversarial training ([adversarial] plugin = "fgm" | "pgd" | "freelb"): a step whose forward
// and backward passes run on perturbed inputs, the parameters' gradients accumulating across
// them. The perturbation is added to the word embeddings' output of the replica's own examples
// (bertlab/model/bert.h, WordEmbeddingPerturbation); norms and random starts are per example,
// so N replicas give the update of one device (docs/adversarial.md).

#include <ATen/core/Tensor.h>
#include <bertlab/random.h>

#include <cstdint>
#include <functional>

namespace bertlab {

/// What the host gives an adversarial plugin for one micro-batch on one rank.
struct AdversarialBatch {
  /// Forward pass number `pass` (0, 1, ...; its dropout masks are keyed by it) with `delta`
  /// ([examples, seq, hidden], this replica's examples) added to the word embeddings' output
  /// (undefined: clean input); returns the micro-batch's objective, a scalar with autograd
  /// history, divided as the host divides a plain step's.
  std::function<at::Tensor(const at::Tensor& delta, int64_t pass)> objective;
  /// Backpropagates an objective into the parameters' gradients (and delta's, when it requires
  /// grad), as the host does a plain step's (the loss scale applied).
  std::function<void(const at::Tensor& objective)> backward;
  at::Tensor input_mask;  ///< [examples, seq] float32 on the model's device, 1 = real token
  int64_t hidden_size = 0;
  /// The key of the micro-batch's per-example draws (per_example_uniform): seed, step, the first
  /// example's place in the step's global batch and the micro-batch's examples.
  DropoutKey key;
  int64_t global_batch = 0;  ///< the step's examples over every rank and micro-batch
};

class Adversarial {
 public:
  virtual ~Adversarial() = default;
  /// Runs the passes of one micro-batch: forwards through batch.objective, backwards through
  /// batch.backward, the parameters' gradients accumulating. Returns the objective to log.
  virtual double forward_backward(const AdversarialBatch& batch) = 0;
};

enum class PerturbationNorm { kL2, kLinf };
/// Per example (each example's perturbation by its own gradient), or one norm over the replica's
/// whole batch (unif's, so the step depends on how the batch is split).
enum class NormScope { kExample, kBatch };

/// The norms of g ([examples, ...]) shaped [examples, 1, ..., 1] to divide by: each example's l2
/// or max-abs norm (kBatch: the whole tensor's, for every example), clamped below at 1e-8 as
/// FreeLB's.
at::Tensor perturbation_norms(const at::Tensor& g, PerturbationNorm norm, NormScope scope);

/// An ascent step: delta + alpha · g / perturbation_norms(g).
at::Tensor ascent_step(const at::Tensor& delta, const at::Tensor& g, double alpha,
                       PerturbationNorm norm, NormScope scope);

/// delta projected onto each example's ball of radius epsilon: l2 rescales an example whose norm
/// exceeds epsilon to epsilon, linf clamps every element to [-epsilon, epsilon]. epsilon <= 0:
/// no projection (FreeLB's adv_max_norm = 0).
at::Tensor project_perturbation(const at::Tensor& delta, PerturbationNorm norm, double epsilon);

/// The dropout site whose Philox stream the random starts draw from (beyond any pass's).
inline constexpr int64_t kAdversarialInitSite = (int64_t{1} << 32) - 1;

/// FreeLB's random start for `shape` [examples, seq, hidden], drawn per example
/// (per_example_uniform at kAdversarialInitSite): l2, uniform(-1, 1) · mask · magnitude /
/// √(length · hidden), length the example's real tokens; linf, uniform(-magnitude, magnitude) ·
/// mask. Float32 on the mask's device.
at::Tensor random_perturbation(const DropoutKey& key, c10::IntArrayRef shape,
                               const at::Tensor& input_mask, PerturbationNorm norm,
                               double magnitude);

}  // namespace bertlab
