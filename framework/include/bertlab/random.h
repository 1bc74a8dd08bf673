#pragma once
// Random draws during training that stay reproducible when replicas run as threads.
//
// Replicas that are processes each own libtorch's default CPU generator, seeded alike. Replicas
// that are threads of one process would share it, and the order in which they draw would then
// depend on thread timing. The host gives each thread rank its own generator instead: a copy of
// the default generator taken when training starts, so thread ranks draw exactly what process
// ranks draw. Plugins draw through replica_generator() (or bertlab::dropout) to keep that.

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace bertlab {

/// The generator of the replica training on this thread; libtorch's default CPU generator on a
/// thread without one (one replica, or process ranks).
at::Generator replica_generator();

/// Gives this thread `generator` as its replica generator while the scope lives (the host's
/// replica threads).
class ReplicaGeneratorScope {
 public:
  explicit ReplicaGeneratorScope(at::Generator generator);
  ~ReplicaGeneratorScope();
  ReplicaGeneratorScope(const ReplicaGeneratorScope&) = delete;
  ReplicaGeneratorScope& operator=(const ReplicaGeneratorScope&) = delete;

 private:
  at::Generator generator_;
  ReplicaGeneratorScope* previous_;
  friend at::Generator replica_generator();
};

/// What makes an example's dropout masks in one forward pass ([model] dropout_rng =
/// "per_example"): element j of example e's mask at dropout site s is drawn from Philox 4x32-10
/// with key `seed` and counter (j / 4, s, first_example + e, step), so it is the same whichever
/// replica, process or micro-batch computes the example.
struct DropoutKey {
  uint64_t seed = 0;
  int64_t step = 0;           ///< the global step (resumed runs continue it)
  int64_t first_example = 0;  ///< the position in the step's global batch of this batch's first
  int64_t examples = 0;       ///< examples in this batch (the first dimension at every site)
  /// The forward pass within the step's adversarial procedure ([adversarial], 0 for the first
  /// and for plain training): pass p's sites are numbered from p · kSitesPerPass, so every pass
  /// draws its own masks and pass 0 those of plain training.
  int64_t pass = 0;
};

/// How many dropout sites one forward pass may number before the next pass's.
inline constexpr int64_t kSitesPerPass = int64_t{1} << 20;

/// Masks of the forward passes on this thread are per-example while the scope lives; the sites
/// are numbered in the order dropout() is called, from 0. The host opens one per forward pass.
class PerExampleDropoutScope {
 public:
  explicit PerExampleDropoutScope(const DropoutKey& key);
  ~PerExampleDropoutScope();
  PerExampleDropoutScope(const PerExampleDropoutScope&) = delete;
  PerExampleDropoutScope& operator=(const PerExampleDropoutScope&) = delete;

  const DropoutKey& key() const { return key_; }
  /// The site number of the next dropout call.
  int64_t next_site() { return key_.pass * kSitesPerPass + site_++; }

 private:
  DropoutKey key_;
  int64_t site_ = 0;
  PerExampleDropoutScope* previous_;
  friend PerExampleDropoutScope* per_example_dropout_scope();
};

/// The scope of this thread's forward pass; nullptr outside one (masks from the replica's
/// generator).
PerExampleDropoutScope* per_example_dropout_scope();

/// The inverted-dropout mask of `site` for key.examples examples of `shape` (shape[0] is the
/// examples, or a multiple of them, examples-major): float32 on the CPU, each element
/// 1 / (1 - p) with probability 1 - p, else 0.
at::Tensor per_example_dropout_mask(const DropoutKey& key, int64_t site, c10::IntArrayRef shape,
                                    double p);

/// Uniform draws in [low, high) of `site` for key.examples examples of `shape` (examples-major,
/// as per_example_dropout_mask), from the same Philox stream: element j of example e is
/// low + (high − low) · u / 2^32, u the 32-bit draw of counter (j / 4, site, first_example + e,
/// step). Float32 on the CPU. What adversarial training's random starts draw, so that they do
/// not depend on which replica, process or micro-batch holds the example.
at::Tensor per_example_uniform(const DropoutKey& key, int64_t site, c10::IntArrayRef shape,
                               double low, double high);

/// The same mask computed with tensor operations on `device` (integer arithmetic only, so the
/// bits are those of per_example_dropout_mask on any device): how CUDA tensors get their masks.
/// Float32 on `device`.
at::Tensor per_example_dropout_mask_by_tensor_ops(const DropoutKey& key, int64_t site,
                                                  c10::IntArrayRef shape, double p,
                                                  c10::Device device);

/// Inverted dropout, as at::dropout on the CPU (the same draws in the same order: with the
/// default generator the results are bit-identical), drawing from replica_generator(). The
/// identity when `train` is false or `p` is 0. Inside a PerExampleDropoutScope the mask is
/// per_example_dropout_mask() of the next site instead, on any device (made on the device by
/// per_example_dropout_mask_by_tensor_ops). Otherwise tensors on
/// other devices use at::dropout (their device's default generator).
at::Tensor dropout(const at::Tensor& x, double p, bool train);

}  // namespace bertlab
