#include "host/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <fmt/format.h>

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

std::string blas_description() {
  auto config = find_symbol<char* (*)()>("openblas_get_config");
  auto get_threads = find_symbol<int (*)()>("openblas_get_num_threads");
  if (config == nullptr) return "BLAS: not OpenBLAS (openblas_get_config not found)";
  return fmt::format("OpenBLAS {} ({} threads)", config(), get_threads ? get_threads() : -1);
}

}  // namespace bertlab
