// The NCCL communicator of a build against a CPU-only libtorch: it does not exist, and asking
// for it says how to get it.
#include "comm/nccl_communicator.h"

#include <bertlab/error.h>

namespace bertlab {

bool nccl_available() { return false; }

int cuda_device_count() { return 0; }

std::unique_ptr<Communicator> make_nccl_communicator(const RendezvousStore&, int rank,
                                                     int world_size, std::chrono::milliseconds,
                                                     int) {
  throw ConfigError(fmt::format(
      "[comm] rank {} of {}: NCCL was asked for, but this bertlab was built against a CPU-only "
      "libtorch; rebuild against a CUDA libtorch (see the README's \"GPUs\"), or use "
      "[strategy] backend = \"gloo\"",
      rank, world_size));
}

}  // namespace bertlab
