#pragma once
// The thread ranks of one process: the replica group that `run`, `gradcheck` (through run) and
// `bench step` train on when the ranks are threads (`replicas = N`, launcher = "threads").

#include <bertlab/communicator.h>
#include <c10/core/Device.h>

#include <chrono>
#include <functional>

namespace bertlab {

/// Runs `body(rank, comm)` on `world` thread ranks, each with its own Gloo communicator over one
/// in-process store (tensors on `device`) and its own copy of the seeded generator, so that what
/// a rank draws does not depend on timing. `world` 1 runs on this thread with a local
/// communicator. When ranks fail, a rank's own error is rethrown before the CommErrors of the
/// ranks that then waited for it in vain.
void run_thread_ranks(int world, std::chrono::milliseconds timeout, c10::Device device,
                      const std::function<void(int rank, Communicator& comm)>& body);

}  // namespace bertlab
