#pragma once
// Gradient collectives every strategy builds on.

#include <string>

namespace bertlab {

class Communicator;
class GradientSet;
struct StrategyContract;

/// How a dense bucket travels in all_reduce_mean_dense (mirrored's `compression`).
enum class WireFormat {
  kFloat32,   ///< as computed: exact up to summation order
  kFloat16,   ///< IEEE half: 11-bit significand, largest finite 65504
  kBFloat16,  ///< bfloat16: 8-bit significand, float32's range
};

/// A strategy's `compression` option: "none" (float32), "fp16" or "bf16"; anything else throws.
WireFormat parse_compression(const std::string& value);

/// How all_reduce_mean_dense averages.
struct DenseReduceOptions {
  double bucket_mb = 25.0;                 ///< MiB of float32 gradients per all-reduce bucket
  WireFormat wire = WireFormat::kFloat32;  ///< the bucket's type during the all-reduce
  /// With a compressed wire: true divides each bucket by N before the cast (PyTorch's
  /// fp16_compress_hook after its fix, so the sum stays in range); false casts, sums and
  /// divides after casting back, as the hook first did: a sum past 65504 is inf in float16.
  bool divide_before_cast = true;
};

/// Averages every dense entry over the ranks: flattened into buckets of at most
/// `options.bucket_mb` MiB, each all-reduced (sum) and divided by the world size, on the wire in
/// `options.wire`. Sparse entries, and entries already averaged (GradientEntry::averaged), are
/// left alone.
void all_reduce_mean_dense(GradientSet& grads, Communicator& comm,
                           const DenseReduceOptions& options);

/// The contract of all_reduce_mean_dense over `replicas` ranks: exact in float32; bounded with a
/// 16-bit wire (each of the N divided gradients rounded once when cast, then N − 1 additions
/// rounded in 16 bits: |error| <= γ_N·mean|g_i| + N·(half the format's smallest subnormal
/// spacing), γ_N = N·u/(1 − N·u), u = 2^-11 (float16) or 2^-8 (bfloat16), plus float32's 2^-24
/// for the division), while no sum overflows the format.
StrategyContract dense_reduce_contract(WireFormat wire, int replicas);

/// The same in float32 with buckets of `bucket_mb` MiB.
void all_reduce_mean_dense(GradientSet& grads, Communicator& comm, double bucket_mb);

}  // namespace bertlab
