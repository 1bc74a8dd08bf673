// Gloo communicators for thread ranks and process ranks, over the ranks' rendezvous store.

#include "comm/gloo_communicator.h"

#include <bertlab/error.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <csignal>
#include <mutex>

#include "comm/c10d_communicator.h"

namespace bertlab {

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
