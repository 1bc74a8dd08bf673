#include "comm/gloo_communicator.h"

#include <bertlab/error.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

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

namespace {

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
  }

  ~GlooCommunicator() override {
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
    for (auto& t : tensors) {
      count_bytes(t.numel() * static_cast<int64_t>(t.element_size()));
      std::vector<at::Tensor> one{t};
      wait(group_->allreduce(one), "all_reduce");
    }
  }

  std::vector<at::Tensor> all_gather(const at::Tensor& tensor) override {
    std::vector<at::Tensor> input{tensor.contiguous()};
    count_bytes(tensor.numel() * static_cast<int64_t>(tensor.element_size()));
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < world_size_; ++r) output[0].push_back(at::empty_like(input[0]));
    wait(group_->allgather(output, input), "all_gather");
    return output[0];
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
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

  /// The ranks that have closed their communicator (stopped, or failed and unwound).
  std::string ranks_that_left() const {
    std::vector<int> left;
    for (int r = 0; r < world_size_; ++r) {
      try {
        if (r != rank_ && store_->check({left_key(r)})) left.push_back(r);
      } catch (const std::exception&) {
        return "the store is unreachable (rank 0 may have stopped)";
      }
    }
    if (left.empty()) return "no rank has reported leaving; one may have crashed or be stuck";
    return fmt::format("rank {} stopped", fmt::join(left, ", "));
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
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const RendezvousStore& store, int rank,
                                                     int world_size,
                                                     std::chrono::milliseconds timeout,
                                                     const std::string& hostname) {
  return std::make_unique<GlooCommunicator>(store.impl->store, rank, world_size, timeout, hostname);
}

}  // namespace bertlab
