// bertlab's sgemm_: libtorch's float32 matrix products, through oneDNN or the BLAS.

#include "runtime/gemm.h"

#include <bertlab/error.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bertlab {

namespace {

using BlasSgemm = void (*)(const char*, const char*, const int*, const int*, const int*,
                           const float*, const float*, const int*, const float*, const int*,
                           const float*, float*, const int*);

std::atomic<GemmBackend> g_backend{GemmBackend::kOneDnn};
std::atomic<int64_t> g_calls{0};

/// The BLAS library's sgemm_: the next definition after this library's in the lookup order.
BlasSgemm blas_sgemm() {
  static const auto fn = reinterpret_cast<BlasSgemm>(::dlsym(RTLD_NEXT, "sgemm_"));
  return fn;
}

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "another";
  }
}

}  // namespace

void set_gemm_backend(GemmBackend backend) { g_backend = backend; }
GemmBackend gemm_backend() { return g_backend; }
const char* to_string(GemmBackend backend) {
  return backend == GemmBackend::kOneDnn ? "onednn" : "blas";
}
int64_t gemm_calls() { return g_calls; }

void set_gemm_backend_from_environment() {
  const char* env = std::getenv("BERTLAB_GEMM");
  if (env == nullptr || std::strcmp(env, "onednn") == 0) {
    set_gemm_backend(GemmBackend::kOneDnn);
  } else if (std::strcmp(env, "blas") == 0) {
    set_gemm_backend(GemmBackend::kBlas);
  } else {
    throw ConfigError(fmt::format(
        "BERTLAB_GEMM={}: not a matrix-product backend; use onednn (the default) or blas", env));
  }
}

std::string onednn_description() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{} ({})", v->major, v->minor, v->patch,
                     isa_name(dnnl_get_effective_cpu_isa()));
}

}  // namespace bertlab

/// The Fortran BLAS interface (column-major) that libtorch calls. C = αAB + βC in column-major
/// order is Cᵀ = αBᵀAᵀ + βCᵀ in row-major order, which is oneDNN's: the same memory, the operands
/// and their dimensions swapped.
extern "C" __attribute__((visibility("default"))) void sgemm_(
    const char* transa, const char* transb, const int* m, const int* n, const int* k,
    const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
    const float* beta, float* c, const int* ldc) {
  ++bertlab::g_calls;
  const bertlab::BlasSgemm blas = bertlab::blas_sgemm();
  // BLAS's quick returns (an empty product, k = 0) and the blas backend: the BLAS's own.
  if (blas != nullptr &&
      (bertlab::g_backend == bertlab::GemmBackend::kBlas || *m <= 0 || *n <= 0 || *k <= 0)) {
    blas(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const dnnl_status_t status =
      dnnl_sgemm(*transb, *transa, *n, *m, *k, *alpha, b, *ldb, a, *lda, *beta, c, *ldc);
  if (status != dnnl_success) {
    std::fprintf(stderr, "bertlab: oneDNN sgemm failed (status %d) for %c%c %dx%dx%d\n",
                 static_cast<int>(status), *transa, *transb, *m, *n, *k);
    std::abort();
  }
}
