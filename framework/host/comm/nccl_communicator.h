#pragma once
// The Communicator over c10d's ProcessGroupNCCL: one rank per CUDA device. It exists only in a
// build against a libtorch with CUDA (comm/cuda/); a CPU-only build has a stand-in that says so
// (comm/no_cuda/), so callers need no build switch.

#include <bertlab/communicator.h>

#include <chrono>
#include <memory>

#include "comm/gloo_communicator.h"

namespace bertlab {

/// True when this build has the NCCL communicator and this machine has a CUDA device.
bool nccl_available();

/// CUDA devices visible to this process; 0 in a build without CUDA.
int cuda_device_count();

/// Joins the NCCL group as `rank` of `world_size` on CUDA device `device_index` (made this
/// thread's current device). Collectives fail after `timeout` instead of hanging. Throws
/// ConfigError in a build without NCCL, or when the device does not exist.
std::unique_ptr<Communicator> make_nccl_communicator(const RendezvousStore& store, int rank,
                                                     int world_size,
                                                     std::chrono::milliseconds timeout,
                                                     int device_index);

}  // namespace bertlab
