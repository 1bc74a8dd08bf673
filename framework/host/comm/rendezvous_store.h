#pragma once
// Where the ranks of a group meet: a HashStore shared by the threads of one process
// (`replicas = N`), or a TCPStore served by rank 0 for ranks that are processes; and the
// exchange of texts (resolved configurations) through it.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace bertlab {

/// Where the ranks of one group meet; shared by every rank of the group.
class RendezvousStore {
 public:
  /// An in-process store for ranks that are threads of this process.
  static std::shared_ptr<RendezvousStore> in_process();
  /// A TCP store at `host`:`port`, served by rank 0 (torchrun's MASTER_ADDR / MASTER_PORT);
  /// with an `agent_store_prefix`, served by torchrun's agent and joined by every rank, its keys
  /// under the prefix (ProcessRank::agent_store_prefix).
  static std::shared_ptr<RendezvousStore> tcp(const std::string& host, int port, int rank,
                                              int world_size, std::chrono::milliseconds timeout,
                                              const std::string& agent_store_prefix = "");
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

/// Ignores SIGPIPE unless the program chose a disposition itself: a peer that stopped closes its
/// sockets, and a write to one must fail with an error that names it, not kill this process.
void ignore_broken_pipes();

}  // namespace bertlab
