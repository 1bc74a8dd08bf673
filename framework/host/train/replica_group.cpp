// Thread ranks: one thread, one Gloo communicator and one generator copy per rank; errors
// reported cause first.

#include "train/replica_group.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <bertlab/error.h>
#include <bertlab/random.h>

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/gloo_communicator.h"

namespace bertlab {

void run_thread_ranks(int world, std::chrono::milliseconds timeout, c10::Device device,
                      const std::function<void(int rank, Communicator& comm)>& body) {
  if (world == 1) {
    auto comm = make_local_communicator();
    body(0, *comm);
    return;
  }
  auto store = RendezvousStore::in_process();
  std::vector<at::Generator> generators;
  {
    at::Generator seeded = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(seeded.mutex());
    for (int r = 0; r < world; ++r) generators.push_back(seeded.clone());
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<bool> comm_failure(static_cast<size_t>(world), false);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      const auto i = static_cast<size_t>(r);
      try {
        ReplicaGeneratorScope draws(generators[i]);
        // Thread ranks share this process's device: Gloo (NCCL wants a device per rank).
        auto comm = make_gloo_communicator(*store, r, world, timeout, GlooBinding{}, device);
        body(r, *comm);
      } catch (const CommError&) {
        comm_failure[i] = true;
        errors[i] = std::current_exception();
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < errors.size(); ++r) {
    if (errors[r] && !comm_failure[r]) std::rethrow_exception(errors[r]);
  }
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace bertlab
