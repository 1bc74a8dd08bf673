// The NCCL communicator: c10d's ProcessGroupNCCL behind the same C10dCommunicator as Gloo.
// Compiled only against a libtorch with CUDA (framework/CMakeLists.txt); scripts/lint.sh
// compiles it for syntax against the CPU build's headers too.
#include "comm/nccl_communicator.h"

#include <ATen/core/Tensor.h>
#include <bertlab/error.h>
#include <bertlab/log.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "comm/c10d_communicator.h"

namespace bertlab {

int cuda_device_count() { return c10::cuda::device_count(); }

bool nccl_available() { return cuda_device_count() > 0; }

std::unique_ptr<Communicator> make_nccl_communicator(const RendezvousStore& store, int rank,
                                                     int world_size,
                                                     std::chrono::milliseconds timeout,
                                                     int device_index) {
  const int devices = c10::cuda::device_count();
  BERTLAB_CHECK_AS(ConfigError, device_index >= 0 && device_index < devices,
                   "[comm] rank {} of {}: CUDA device {} does not exist ({} visible); NCCL needs "
                   "one device per rank: start at most {} ranks per machine, or set "
                   "CUDA_VISIBLE_DEVICES",
                   rank, world_size, device_index, devices, devices);
  // NCCL binds a communicator to the calling thread's current device.
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
  const c10::intrusive_ptr<c10d::Store>& st = store.impl->store;
  auto comm = std::make_unique<C10dCommunicator<c10d::ProcessGroupNCCL>>(
      "nccl", st, rank, world_size, timeout,
      c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_index)), [&] {
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = timeout;
        return c10::make_intrusive<c10d::ProcessGroupNCCL>(st, rank, world_size, options);
      });
  log_info("comm", "rank {} of {}: NCCL {}.{}.{} on cuda:{}", rank, world_size, NCCL_MAJOR,
           NCCL_MINOR, NCCL_PATCH, device_index);
  return comm;
}

}  // namespace bertlab
