// Setting libtorch's and OpenBLAS's thread counts together.

#include "runtime/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <malloc.h>

#include <climits>
#include <cstdlib>
#include <cstring>

namespace bertlab {

namespace {
// OpenBLAS is reached through libtorch's BLAS dependency; look its controls up at run time so
// bertlab also runs (with a note in the log) on a machine whose BLAS is another one.
template <typename Fn>
Fn find_symbol(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}
}  // namespace

void set_compute_threads(int threads) {
  at::set_num_threads(threads);
  if (auto set = find_symbol<void (*)(int)>("openblas_set_num_threads")) set(threads);
}

void tune_allocator() {
  const char* env = std::getenv("BERTLAB_MALLOC_TUNING");
  if (env != nullptr && std::strcmp(env, "0") == 0) return;
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit; setting it also turns off
  // the dynamic threshold. The trim threshold keeps the freed heap top for the next step.
  ::mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  ::mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

std::string blas_description() {
  auto config = find_symbol<char* (*)()>("openblas_get_config");
  auto get_threads = find_symbol<int (*)()>("openblas_get_num_threads");
  if (config == nullptr) return "BLAS: not OpenBLAS (openblas_get_config not found)";
  return fmt::format("OpenBLAS {} ({} threads)", config(), get_threads ? get_threads() : -1);
}

}  // namespace bertlab
