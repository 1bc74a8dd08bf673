#pragma once
// Communicators over c10d's ProcessGroupGloo. The ranks meet through a store: a HashStore
// shared by the threads of one process (`replicas = N`), or a TCPStore served by rank 0 for
// ranks that are processes.

#include <bertlab/communicator.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/gloo_binding.h"

namespace bertlab {

/// Where the ranks of one group meet; shared by every rank of the group.
class RendezvousStore {
 public:
  /// An in-process store for ranks that are threads of this process.
  static std::shared_ptr<RendezvousStore> in_process();
  /// A TCP store at `host`:`port`, served by rank 0 (torchrun's MASTER_ADDR / MASTER_PORT).
  static std::shared_ptr<RendezvousStore> tcp(const std::string& host, int port, int rank,
                                              int world_size, std::chrono::milliseconds timeout);
  /// A view of `base` whose keys carry `prefix`, so successive groups on one store (one per
  /// variant) do not collide.
  static std::shared_ptr<RendezvousStore> prefixed(const RendezvousStore& base,
                                                   const std::string& prefix);
  ~RendezvousStore();

  struct Impl;
  std::unique_ptr<Impl> impl;

 private:
  RendezvousStore();
};

/// Publishes `text` under `key` as this rank's and returns every rank's (index: rank), waiting
/// for each up to `timeout`. Throws Error naming the ranks that did not publish in time.
std::vector<std::string> exchange_text(const RendezvousStore& store, const std::string& key,
                                       const std::string& text, int rank, int world_size,
                                       std::chrono::milliseconds timeout);

/// Joins the group as `rank` of `world_size` (blocks until every rank has joined or `timeout`
/// passes). Every collective of the result fails after `timeout` instead of hanging, and first
/// checks that every rank passes the same sizes (an error, not a hang or silent corruption,
/// when they do not). While it lives, a heartbeat in the store tells the others this rank is
/// alive, so that a failed collective names a rank that was killed or crashed.
/// `binding`: where this rank's sockets bind (loopback for ranks on this machine; see
/// choose_gloo_binding). `device`: where this rank's tensors live (Gloo stages CUDA tensors
/// through the host).
std::unique_ptr<Communicator> make_gloo_communicator(const RendezvousStore& store, int rank,
                                                     int world_size,
                                                     std::chrono::milliseconds timeout,
                                                     const GlooBinding& binding = {},
                                                     c10::Device device = c10::Device(c10::kCPU));

}  // namespace bertlab
