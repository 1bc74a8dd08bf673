// Gloo communicators for thread ranks (one HashStore) and process ranks (a TCPStore served by
// rank 0), with rendezvous errors that name the address, the port and what to check.

#include "comm/gloo_communicator.h"

#include <bertlab/error.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <csignal>
#include <mutex>

#include "comm/c10d_communicator.h"

namespace bertlab {
namespace {

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

/// `text` without its closing period, for quoting inside a sentence of ours.
std::string without_final_period(std::string text) {
  while (!text.empty() && (text.back() == '.' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

RendezvousStore::RendezvousStore() : impl(std::make_unique<Impl>()) {}
RendezvousStore::~RendezvousStore() = default;

std::shared_ptr<RendezvousStore> RendezvousStore::in_process() {
  std::shared_ptr<RendezvousStore> out(new RendezvousStore());
  out->impl->store = c10::make_intrusive<c10d::HashStore>();
  return out;
}

std::shared_ptr<RendezvousStore> RendezvousStore::tcp(const std::string& host, int port, int rank,
                                                      int world_size,
                                                      std::chrono::milliseconds timeout) {
  ignore_broken_pipes();
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = rank == 0;
  options.numWorkers = static_cast<std::size_t>(world_size);
  options.waitWorkers = true;
  options.timeout = timeout;
  std::shared_ptr<RendezvousStore> out(new RendezvousStore());
  try {
    out->impl->store = c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    throw Error(fmt::format(
        "[comm] rank {} of {}: the rendezvous at {}:{} failed within {} s: {}; check that every "
        "rank is started with the same MASTER_ADDR and MASTER_PORT, that MASTER_ADDR is rank 0's "
        "machine, and that this machine reaches {} on TCP port {} (firewall; GLOO_SOCKET_IFNAME "
        "names the interface the ranks share)",
        rank, world_size, host, port, timeout.count() / 1000.0, without_final_period(error_text(e)),
        host, port));
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
    throw Error(fmt::format("[comm] rank {} of {}: publishing its {} in the store failed: {}", rank,
                            world_size, key, error_text(e)));
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
  BERTLAB_CHECK(missing.empty(),
                "[comm] rank {} of {}: rank {} did not publish its {} in the store within {} ms "
                "(was it started, with the same MASTER_ADDR and MASTER_PORT, and does its machine "
                "reach the store? its own message says more)",
                rank, world_size, fmt::join(missing, ", "), key, timeout.count());
  return out;
}

namespace detail {

namespace {

std::string left_key(int rank) { return "bertlab/left/" + std::to_string(rank); }
std::string alive_key(int rank) { return "bertlab/alive/" + std::to_string(rank); }
constexpr auto kBeat = std::chrono::milliseconds(500);

/// Milliseconds since the epoch, as a heartbeat's value.
std::vector<uint8_t> now_bytes() {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  const std::string text = std::to_string(ms);
  return {text.begin(), text.end()};
}

}  // namespace

RankPresence::RankPresence(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size)
    : rank_(rank), world_size_(world_size), store_(std::move(store)) {
  thread_ = std::thread([this] { beat(); });
}

RankPresence::~RankPresence() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // Tell the ranks still waiting in a collective who left (see ranks_that_left()).
  try {
    store_->set(left_key(rank_), std::vector<uint8_t>{1});
  } catch (const std::exception&) {
    // The store's server (rank 0) may be gone already; nobody is left to tell.
  }
}

/// The heartbeat thread: this rank's alive key, rewritten every kBeat until destruction.
void RankPresence::beat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    try {
      store_->set(alive_key(rank_), now_bytes());
    } catch (const std::exception&) {
      // The store's server (rank 0) is gone; the collectives will say so.
    }
    wake_.wait_for(lock, kBeat, [this] { return stopping_; });
  }
}

/// Every rank's heartbeat value ("" when none yet); throws when the store is unreachable.
std::vector<std::string> RankPresence::heartbeats() const {
  std::vector<std::string> out(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_ || !store_->check({alive_key(r)})) continue;
    const auto bytes = store_->get(alive_key(r));
    out[r].assign(bytes.begin(), bytes.end());
  }
  return out;
}

std::string RankPresence::ranks_that_left() const {
  try {
    std::vector<int> left, silent;
    for (int r = 0; r < world_size_; ++r) {
      if (r != rank_ && store_->check({left_key(r)})) left.push_back(r);
    }
    if (!left.empty()) return fmt::format("rank {} stopped", fmt::join(left, ", "));
    const auto before = heartbeats();
    std::this_thread::sleep_for(4 * kBeat);
    const auto after = heartbeats();
    for (int r = 0; r < world_size_; ++r) {
      if (r != rank_ && before[r] == after[r]) silent.push_back(r);
    }
    if (!silent.empty()) {
      return fmt::format("rank {} stopped responding (killed, crashed or stuck)",
                         fmt::join(silent, ", "));
    }
    return "every rank is still alive; one may be stuck or running something else";
  } catch (const std::exception&) {
    return "the store is unreachable: rank 0, which serves it, has stopped";
  }
}

std::vector<int64_t> size_signature(const std::vector<at::Tensor>& tensors) {
  int64_t elements = 0;
  uint64_t digest = 1469598103934665603ull;  // FNV-1a over the shapes and dtypes
  for (const auto& t : tensors) {
    elements += t.numel();
    for (const int64_t d : t.sizes())
      digest = (digest ^ static_cast<uint64_t>(d)) * 1099511628211ull;
    digest = (digest ^ static_cast<uint64_t>(t.scalar_type())) * 1099511628211ull;
  }
  return {static_cast<int64_t>(tensors.size()), elements, static_cast<int64_t>(digest >> 2)};
}

}  // namespace detail

namespace {

/// Past the group's timeout, how long a join may take before join_within gives up on it.
constexpr auto kJoinGrace = std::chrono::milliseconds(2000);

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const RendezvousStore& store, int rank,
                                                     int world_size,
                                                     std::chrono::milliseconds timeout,
                                                     const GlooBinding& binding,
                                                     c10::Device device) {
  ignore_broken_pipes();
  const c10::intrusive_ptr<c10d::Store>& st = store.impl->store;
  // Everything by value: on a deadline the joining thread is left behind (see join_within).
  auto join = [st, rank, world_size, timeout, binding] {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    if (binding.interfaces.empty()) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(binding.address));
    }
    for (const auto& name : binding.interfaces) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
    options->threads = 1;
    return c10::make_intrusive<c10d::ProcessGroupGloo>(st, rank, world_size, options);
  };
  return std::make_unique<C10dCommunicator<c10d::ProcessGroupGloo>>(
      "gloo", st, rank, world_size, timeout, device, [&] {
        try {
          return detail::join_within<c10::intrusive_ptr<c10d::ProcessGroupGloo>>(
              timeout + kJoinGrace, join);
        } catch (const std::exception& e) {
          // Gloo names the peer it could not reach; say what to check.
          throw Error(fmt::format(
              "{} (this rank bound Gloo to {}; check that the ranks' machines reach each other's "
              "addresses on any TCP port (firewall), and set GLOO_SOCKET_IFNAME to the interface "
              "of the network they share)",
              error_text(e), binding.describe()));
        }
      });
}

}  // namespace bertlab
