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

/// Inverted dropout, as at::dropout on the CPU (the same draws in the same order: with the
/// default generator the results are bit-identical), drawing from replica_generator(). The
/// identity when `train` is false or `p` is 0. Tensors on other devices use at::dropout (their
/// device's default generator).
at::Tensor dropout(const at::Tensor& x, double p, bool train);

}  // namespace bertlab
