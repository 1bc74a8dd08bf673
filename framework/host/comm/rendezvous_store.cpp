// The ranks' rendezvous store (c10d's HashStore in a process, TCPStore across processes) and the
// exchange of texts through it, with errors that name the address, the port and what to check.

#include "comm/rendezvous_store.h"

#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <csignal>
#include <mutex>

#include "comm/c10d_communicator.h"

namespace bertlab {
namespace {

/// `text` without its closing period, for quoting inside a sentence of ours.
std::string without_final_period(std::string text) {
  while (!text.empty() && (text.back() == '.' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

// A rank that stops closes its sockets; a peer still writing to one would get SIGPIPE, whose
// default action kills the process before the collective can say which rank stopped. Ignored,
// the write fails with EPIPE instead and Gloo or the store raises it as an error. A disposition
// the program chose itself is kept.
void ignore_broken_pipes() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      sigaction(SIGPIPE, &ignore, nullptr);
    }
  });
}

RendezvousStore::RendezvousStore() : impl(std::make_unique<Impl>()) {}
RendezvousStore::~RendezvousStore() = default;

std::shared_ptr<RendezvousStore> RendezvousStore::in_process() {
  std::shared_ptr<RendezvousStore> out(new RendezvousStore());
  out->impl->store = c10::make_intrusive<c10d::HashStore>();
  return out;
}

std::shared_ptr<RendezvousStore> RendezvousStore::tcp(const std::string& host, int port, int rank,
                                                      int world_size,
                                                      std::chrono::milliseconds timeout,
                                                      const std::string& agent_store_prefix) {
  ignore_broken_pipes();
  const bool agent = !agent_store_prefix.empty();
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  // Under torchrun 2.x's agent the port is already served: a rank 0 serving it too would fail
  // with "address already in use".
  options.isServer = rank == 0 && !agent;
  options.numWorkers = static_cast<std::size_t>(world_size);
  options.waitWorkers = true;
  options.timeout = timeout;
  std::shared_ptr<RendezvousStore> out(new RendezvousStore());
  try {
    out->impl->store = c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    throw CommError(fmt::format(
        "[comm] rank {} of {}: the rendezvous at {}:{} failed within {} s: {}; check that every "
        "rank is started with the same MASTER_ADDR and MASTER_PORT, that MASTER_ADDR is rank 0's "
        "machine, and that this machine reaches {} on TCP port {} (firewall; GLOO_SOCKET_IFNAME "
        "names the interface the ranks share)",
        rank, world_size, host, port, timeout.count() / 1000.0, without_final_period(error_text(e)),
        host, port));
  }
  if (agent) {
    out->impl->store = c10::make_intrusive<c10d::PrefixStore>(agent_store_prefix, out->impl->store);
  }
  return out;
}

std::shared_ptr<RendezvousStore> RendezvousStore::prefixed(const RendezvousStore& base,
                                                           const std::string& prefix) {
  std::shared_ptr<RendezvousStore> out(new RendezvousStore());
  out->impl->store = c10::make_intrusive<c10d::PrefixStore>(prefix, base.impl->store);
  return out;
}

std::vector<std::string> exchange_text(const RendezvousStore& store, const std::string& key,
                                       const std::string& text, int rank, int world_size,
                                       std::chrono::milliseconds timeout) {
  c10d::Store& st = *store.impl->store;
  auto key_of = [&](int r) { return fmt::format("bertlab/{}/{}", key, r); };
  try {
    st.set(key_of(rank), std::vector<uint8_t>(text.begin(), text.end()));
  } catch (const std::exception& e) {
    throw CommError(fmt::format("[comm] rank {} of {}: publishing its {} in the store failed: {}",
                                rank, world_size, key, error_text(e)));
  }
  std::vector<std::string> out(world_size);
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r) {
    try {
      st.wait({key_of(r)}, timeout);
      const std::vector<uint8_t> bytes = st.get(key_of(r));
      out[r].assign(bytes.begin(), bytes.end());
    } catch (const std::exception&) {
      missing.push_back(r);
    }
  }
  BERTLAB_CHECK_AS(
      CommError, missing.empty(),
      "[comm] rank {} of {}: rank {} did not publish its {} in the store within {} ms "
      "(was it started, with the same MASTER_ADDR and MASTER_PORT, and does its machine "
      "reach the store? its own message says more)",
      rank, world_size, fmt::join(missing, ", "), key, timeout.count());
  return out;
}

}  // namespace bertlab
