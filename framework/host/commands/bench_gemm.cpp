// `bertlab bench gemm`: the machine's float32 matrix-product rate, to put a training step's FLOP
// rate in proportion.

#include "commands/bench_gemm.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/gemm.h"
#include "runtime/threads.h"

namespace bertlab {

int bench_gemm(const GemmBenchOptions& o) {
  if (o.size < 1 || o.iterations < 1 || o.threads < 1) {
    throw ConfigError(
        fmt::format("bench gemm: --size, --iters and --threads must be >= 1, got {}, {}, {}",
                    o.size, o.iterations, o.threads));
  }
  set_compute_threads(o.threads);
  at::manual_seed(0);
  const at::Tensor a = at::randn({o.size, o.size});
  const at::Tensor b = at::randn({o.size, o.size});
  at::Tensor c = at::empty({o.size, o.size});
  std::vector<double> rates;
  for (int i = 0; i <= o.iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) rates.push_back(2.0 * std::pow(static_cast<double>(o.size), 3) / s / 1e9);
  }
  nlohmann::ordered_json j;
  j["size"] = o.size;
  j["threads"] = o.threads;
  std::sort(rates.begin(), rates.end());
  j["gflops"] = rates[rates.size() / 2];
  j["blas"] = blas_description();
  // The products' backend (BERTLAB_GEMM), and whether they went through bertlab's sgemm_.
  j["gemm"] = to_string(gemm_backend());
  j["gemm_library"] =
      gemm_backend() == GemmBackend::kOneDnn ? onednn_description() : blas_description();
  j["through_bertlab"] = gemm_calls() > 0;
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace bertlab
