#pragma once
// `bertlab bench gemm`: the machine's float32 matrix-product rate.

#include <cstdint>

namespace bertlab {

struct GemmBenchOptions {
  int64_t size = 1024;  ///< square float32 matrices
  int threads = 1;
  int iterations = 10;  ///< timed products, after one warm-up
};

/// Prints one JSON line: gflops (median over the products) at the thread count.
int bench_gemm(const GemmBenchOptions& options);

}  // namespace bertlab
