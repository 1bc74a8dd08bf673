#pragma once
// CPU threading: libtorch's intra-op pool and OpenBLAS's own pool share one setting, because
// with both at their defaults they oversubscribe the cores (measured in the README).

#include <string>

namespace bertlab {

/// Sets libtorch's intra-op threads and OpenBLAS's threads to `threads`.
void set_compute_threads(int threads);

/// "OpenBLAS 0.3.21 ... (N threads)" or what BLAS the process uses, for the start-of-run log.
std::string blas_description();

}  // namespace bertlab
