#pragma once
// CPU threading: libtorch's intra-op pool and OpenBLAS's own pool share one setting, because
// with both at their defaults they oversubscribe the cores (measured in the README).

#include <string>

namespace bertlab {

/// Sets libtorch's intra-op threads and OpenBLAS's threads to `threads`.
void set_compute_threads(int threads);

/// Keeps freed tensor memory in the process instead of returning it to the kernel: glibc
/// serves blocks above 32 MiB with mmap and trims the heap top eagerly, so every step's large
/// activations and gradients are page-faulted in anew, which cost about 30% of a training step
/// on the development machine (README, "Memory allocator"). BERTLAB_MALLOC_TUNING=0 keeps
/// glibc's defaults. Call once, early in main().
void tune_allocator();

/// "OpenBLAS 0.3.21 ... (N threads)" or what BLAS the process uses, for the start-of-run log.
std::string blas_description();

}  // namespace bertlab
