#include "comm/gloo_communicator.h"

#include <bertlab/error.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace bertlab {

struct RendezvousStore::Impl {
  c10::intrusive_ptr<c10d::Store> store;
};

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
        "[comm] rank {} of {}: the rendezvous at {}:{} failed (is every rank started, with the "
        "same MASTER_ADDR and MASTER_PORT?): {}",
        rank, world_size, host, port, e.what()));
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
                            world_size, key, e.what()));
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
                "[comm] rank {} of {}: rank {} did not publish its {} within {} ms", rank,
                world_size, fmt::join(missing, ", "), key, timeout.count());
  return out;
}

namespace {

/// Milliseconds since the epoch, as a heartbeat's value.
std::vector<uint8_t> now_bytes() {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  const std::string text = std::to_string(ms);
  return {text.begin(), text.end()};
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                   std::chrono::milliseconds timeout, const std::string& hostname)
      : rank_(rank), world_size_(world_size), timeout_(timeout), store_(store) {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(hostname));
    options->threads = 1;
    try {
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
    } catch (const std::exception& e) {
      throw Error(fmt::format("[comm] rank {} of {}: joining the Gloo group failed: {}", rank,
                              world_size, e.what()));
    }
    heartbeat_ = std::thread([this] { beat(); });
  }

  ~GlooCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(heartbeat_mutex_);
      stopping_ = true;
    }
    heartbeat_wake_.notify_all();
    heartbeat_.join();
    // Tell the ranks still waiting in a collective who left (see wait()).
    try {
      store_->set(left_key(rank_), std::vector<uint8_t>{1});
    } catch (const std::exception&) {
      // The store's server (rank 0) may be gone already; nobody is left to tell.
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "gloo"; }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    check_same_sizes(tensors, "all_reduce");
    for (auto& t : tensors) {
      count_bytes(t.numel() * static_cast<int64_t>(t.element_size()));
      std::vector<at::Tensor> one{t};
      wait(group_->allreduce(one), "all_reduce");
    }
  }

  std::vector<at::Tensor> all_gather(const at::Tensor& tensor) override {
    check_same_sizes({tensor}, "all_gather");
    std::vector<at::Tensor> input{tensor.contiguous()};
    count_bytes(tensor.numel() * static_cast<int64_t>(tensor.element_size()));
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < world_size_; ++r) output[0].push_back(at::empty_like(input[0]));
    wait(group_->allgather(output, input), "all_gather");
    return output[0];
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    check_same_sizes(tensors, "broadcast");
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    for (auto& t : tensors) {
      if (rank_ == root) count_bytes(t.numel() * static_cast<int64_t>(t.element_size()));
      std::vector<at::Tensor> one{t};
      wait(group_->broadcast(one, opts), "broadcast");
    }
  }

  void barrier() override { wait(group_->barrier(), "barrier"); }

 private:
  static std::string left_key(int rank) { return "bertlab/left/" + std::to_string(rank); }

  static std::string alive_key(int rank) { return "bertlab/alive/" + std::to_string(rank); }
  static constexpr auto kBeat = std::chrono::milliseconds(500);

  /// The heartbeat thread: this rank's alive key, rewritten every kBeat until destruction.
  void beat() {
    std::unique_lock<std::mutex> lock(heartbeat_mutex_);
    while (!stopping_) {
      try {
        store_->set(alive_key(rank_), now_bytes());
      } catch (const std::exception&) {
        // The store's server (rank 0) is gone; the collectives will say so.
      }
      heartbeat_wake_.wait_for(lock, kBeat, [this] { return stopping_; });
    }
  }

  /// Every rank's heartbeat value ("" when none yet); throws when the store is unreachable.
  std::vector<std::string> heartbeats() const {
    std::vector<std::string> out(world_size_);
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_ || !store_->check({alive_key(r)})) continue;
      const auto bytes = store_->get(alive_key(r));
      out[r].assign(bytes.begin(), bytes.end());
    }
    return out;
  }

  /// Which ranks are gone, for the message of a failed collective: those that closed their
  /// communicator (stopped, or failed and unwound), then those whose heartbeat stopped
  /// (killed or crashed) over a few beats of watching.
  std::string ranks_that_left() const {
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

  /// Fails, instead of hanging or mixing unrelated bytes, when the ranks pass collectives of
  /// different sizes: one small all-reduce (max) of [count, elements, digest] and their
  /// negations, whose maxima equal this rank's values on every rank only when all agree.
  void check_same_sizes(const std::vector<at::Tensor>& tensors, const char* what) {
    int64_t elements = 0;
    uint64_t digest = 1469598103934665603ull;  // FNV-1a over the shapes
    for (const auto& t : tensors) {
      elements += t.numel();
      for (const int64_t d : t.sizes())
        digest = (digest ^ static_cast<uint64_t>(d)) * 1099511628211ull;
      digest = (digest ^ static_cast<uint64_t>(t.scalar_type())) * 1099511628211ull;
    }
    const int64_t mine[3] = {static_cast<int64_t>(tensors.size()), elements,
                             static_cast<int64_t>(digest >> 2)};
    at::Tensor sizes = at::empty({6}, at::kLong);
    auto* v = sizes.data_ptr<int64_t>();
    for (int i = 0; i < 3; ++i) v[i] = mine[i], v[3 + i] = -mine[i];
    std::vector<at::Tensor> one{sizes};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::MAX;
    wait(group_->allreduce(one, opts), what);
    bool same = true;
    for (int i = 0; i < 3; ++i) same = same && v[i] == mine[i] && -v[3 + i] == mine[i];
    BERTLAB_CHECK(same,
                  "[comm] rank {} of {}: the ranks disagree on the size of a {}: this rank passes "
                  "{} tensor(s) of {} elements, the ranks pass {} to {} tensors of {} to {} "
                  "elements (are all ranks running the same model and configuration?)",
                  rank_, world_size_, what, mine[0], mine[1], -v[3], v[0], -v[4], v[1]);
  }

  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
    try {
      work->wait(timeout_);
    } catch (const std::exception& e) {
      throw Error(fmt::format("[comm] rank {} of {}: {} failed or timed out after {} ms: {}; {}",
                              rank_, world_size_, what, timeout_.count(), ranks_that_left(),
                              e.what()));
    }
  }

  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::mutex heartbeat_mutex_;
  std::condition_variable heartbeat_wake_;
  bool stopping_ = false;
  std::thread heartbeat_;  // last: started once everything it uses exists
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const RendezvousStore& store, int rank,
                                                     int world_size,
                                                     std::chrono::milliseconds timeout,
                                                     const std::string& hostname) {
  return std::make_unique<GlooCommunicator>(store.impl->store, rank, world_size, timeout, hostname);
}

}  // namespace bertlab
