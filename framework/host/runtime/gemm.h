#pragma once
// bertlab's float32 matrix products. libtorch multiplies float matrices on the CPU through the
// Fortran BLAS routine sgemm_ of the BLAS it was built against (Debian: OpenBLAS). libbertlab_host
// defines sgemm_ itself: the dynamic linker binds libtorch's calls to this definition, which comes
// before the BLAS library's in the lookup order, and hands each product to oneDNN's sgemm (its
// kernels chosen for the CPU at run time: AVX-512, AVX2, ...) or to the BLAS one.
// docs/performance.md, "Matrix products".

#include <cstdint>
#include <string>

namespace bertlab {

enum class GemmBackend { kOneDnn, kBlas };

/// The backend the products use from now on, in this process.
void set_gemm_backend(GemmBackend backend);
GemmBackend gemm_backend();

/// From the environment: BERTLAB_GEMM=onednn (the default) or blas. Throws ConfigError naming
/// the variable and its value for anything else.
void set_gemm_backend_from_environment();

/// "onednn" or "blas".
const char* to_string(GemmBackend backend);

/// Products that went through bertlab's sgemm_ in this process (both backends): nonzero after a
/// float matrix product on the CPU shows that libtorch's products are bertlab's.
int64_t gemm_calls();

/// oneDNN's version and the instruction set its kernels use here, e.g. "oneDNN 2.6.3
/// (avx512_core_amx)".
std::string onednn_description();

}  // namespace bertlab
