#pragma once
// The Communicator over one c10d process group, whichever backend: Gloo (CPU tensors, and CUDA
// tensors staged through the host) or NCCL (CUDA tensors). Private to libbertlab.
//
// libtorch 1.13's ProcessGroupGloo/NCCL derive from c10d::ProcessGroup, 2.x's from c10d::Backend;
// both keep the collectives used here (allreduce, allgather, broadcast, barrier returning a Work
// with wait(timeout)) with the same signatures, so the group is a template parameter and the
// difference never reaches strategy code.

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/rendezvous_store.h"

namespace bertlab {

struct RendezvousStore::Impl {
  c10::intrusive_ptr<c10d::Store> store;
};

namespace detail {

/// The parts of a c10d communicator that do not depend on the group's type: the heartbeat that
/// tells the other ranks this one is alive, and the diagnosis of a failed collective.
class RankPresence {
 public:
  RankPresence(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size);
  /// Stops the heartbeat and marks this rank as gone, so that ranks still waiting name it.
  ~RankPresence();
  RankPresence(const RankPresence&) = delete;
  RankPresence& operator=(const RankPresence&) = delete;

  /// Which ranks are gone, for the message of a failed collective: those that closed their
  /// communicator (stopped, or failed and unwound), then those whose heartbeat stopped
  /// (killed or crashed) over a few beats of watching.
  std::string ranks_that_left() const;

 private:
  void beat();
  std::vector<std::string> heartbeats() const;

  int rank_;
  int world_size_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything it uses exists
};

/// `join()`'s result, or an Error when it has not returned within `limit`. Gloo bounds its
/// connections by the group's timeout, but a connect() whose packets are dropped (a firewall, an
/// address the peer cannot route to) blocks in the kernel for minutes; this keeps "every rank
/// fails within timeout_s" true. `join` must own what it uses: on a deadline its thread is left
/// to finish (or to end with the process, which then fails).
template <class Result>
Result join_within(std::chrono::milliseconds limit, std::function<Result()> join) {
  struct Outcome {
    std::mutex mutex;
    std::condition_variable done;
    bool finished = false;
    Result result;
    std::exception_ptr error;
  };
  auto outcome = std::make_shared<Outcome>();
  std::thread([outcome, join = std::move(join)] {
    Result result;
    std::exception_ptr error;
    try {
      result = join();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(outcome->mutex);
    outcome->result = std::move(result);
    outcome->error = error;
    outcome->finished = true;
    outcome->done.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(outcome->mutex);
  if (!outcome->done.wait_for(lock, limit, [&] { return outcome->finished; })) {
    throw Error(fmt::format(
        "the connections to the peers did not complete within {} s (a peer's address does not "
        "answer)",
        static_cast<double>(limit.count()) / 1000.0));
  }
  if (outcome->error) std::rethrow_exception(outcome->error);
  return std::move(outcome->result);
}

/// [count, elements, shape digest] of the tensors a rank passes to one collective.
std::vector<int64_t> size_signature(const std::vector<at::Tensor>& tensors);

}  // namespace detail

/// A Communicator over the c10d group `Group` (ProcessGroupGloo or ProcessGroupNCCL).
template <class Group>
class C10dCommunicator final : public Communicator {
 public:
  /// `device`: where this rank's tensors live (the size check's small tensor goes there).
  /// `make_group` joins the group (blocks until every rank has joined).
  C10dCommunicator(std::string backend, const c10::intrusive_ptr<c10d::Store>& store, int rank,
                   int world_size, std::chrono::milliseconds timeout, c10::Device device,
                   const std::function<c10::intrusive_ptr<Group>()>& make_group)
      : backend_(std::move(backend)),
        rank_(rank),
        world_size_(world_size),
        timeout_(timeout),
        device_(device) {
    try {
      group_ = make_group();
    } catch (const std::exception& e) {
      throw CommError(fmt::format("[comm] rank {} of {}: joining the {} group failed: {}", rank,
                                  world_size, backend_, error_text(e)));
    }
    presence_ = std::make_unique<detail::RankPresence>(store, rank, world_size);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return backend_; }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    check_same_sizes(tensors, "all_reduce");
    for (auto& t : tensors) {
      count_bytes(t.numel() * static_cast<int64_t>(t.element_size()));
      std::vector<at::Tensor> one{t};
      wait(group_->allreduce(one), "all_reduce");
    }
  }

  std::unique_ptr<PendingCollective> all_reduce_sum_async(
      std::vector<at::Tensor>& tensors) override {
    // The size check blocks (one small all-reduce); the sums themselves run in the background.
    check_same_sizes(tensors, "async all_reduce");
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (auto& t : tensors) {
      count_bytes(t.numel() * static_cast<int64_t>(t.element_size()));
      std::vector<at::Tensor> one{t};
      works.push_back(group_->allreduce(one));
    }
    return std::make_unique<Pending>(*this, std::move(works), "async all_reduce");
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

  /// c10d's reduce_scatter where the group has one (NCCL); otherwise (Gloo in libtorch 1.13
  /// says it does not support it), from the first call on, the default: an all-reduce of the
  /// whole input.
  at::Tensor reduce_scatter_sum(const at::Tensor& input) override {
    if (!reduce_scatter_supported_) return Communicator::reduce_scatter_sum(input);
    BERTLAB_CHECK(input.dim() == 1 && input.numel() % world_size_ == 0,
                  "reduce_scatter_sum: the input must be 1-D with {} equal chunks, got {} elements",
                  world_size_, input.numel());
    check_same_sizes({input}, "reduce_scatter");
    const int64_t chunk = input.numel() / world_size_;
    std::vector<at::Tensor> output{at::empty({chunk}, input.options())};
    std::vector<std::vector<at::Tensor>> inputs(1);
    for (int r = 0; r < world_size_; ++r) {
      inputs[0].push_back(input.narrow(0, r * chunk, chunk).contiguous());
    }
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = group_->reduce_scatter(output, inputs);
    } catch (const c10::Error& e) {
      // Every rank's group is of one kind, so every rank falls back alike.
      if (std::string(e.what()).find("does not support") == std::string::npos) throw;
      reduce_scatter_supported_ = false;
      return Communicator::reduce_scatter_sum(input);
    }
    count_bytes(input.numel() * static_cast<int64_t>(input.element_size()));
    wait(work, "reduce_scatter");
    return output[0];
  }

 private:
  /// Started c10d work, waited for with the communicator's timeout and error message.
  class Pending final : public PendingCollective {
   public:
    Pending(C10dCommunicator& owner, std::vector<c10::intrusive_ptr<c10d::Work>> works,
            const char* what)
        : owner_(owner), works_(std::move(works)), what_(what) {}
    void wait() override {
      for (const auto& work : works_) owner_.wait(work, what_);
      works_.clear();
    }

   private:
    C10dCommunicator& owner_;
    std::vector<c10::intrusive_ptr<c10d::Work>> works_;
    const char* what_;
  };

  /// Fails, instead of hanging or mixing unrelated bytes, when the ranks pass collectives of
  /// different sizes: one small all-reduce (max) of the size signature and its negation, whose
  /// maxima equal this rank's values on every rank only when all agree.
  void check_same_sizes(const std::vector<at::Tensor>& tensors, const char* what) {
    const std::vector<int64_t> mine = detail::size_signature(tensors);
    at::Tensor sizes = at::empty({6}, at::kLong);
    auto* v = sizes.data_ptr<int64_t>();
    for (int i = 0; i < 3; ++i) v[i] = mine[i], v[3 + i] = -mine[i];
    std::vector<at::Tensor> one{sizes.to(device_)};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::MAX;
    wait(group_->allreduce(one, opts), what);
    sizes = one[0].to(at::kCPU);
    v = sizes.data_ptr<int64_t>();
    bool same = true;
    for (int i = 0; i < 3; ++i) same = same && v[i] == mine[i] && -v[3 + i] == mine[i];
    BERTLAB_CHECK_AS(
        CommError, same,
        "[comm] rank {} of {}: the ranks disagree on the size of a {}: this rank passes "
        "{} tensor(s) of {} elements, the ranks pass {} to {} tensors of {} to {} "
        "elements (are all ranks running the same model and configuration?)",
        rank_, world_size_, what, mine[0], mine[1], -v[3], v[0], -v[4], v[1]);
  }

  /// Waits with the timeout: a blocking wait for Gloo and for NCCL alike (c10d's NCCL work
  /// blocks the calling thread when wait() is given a timeout), so a dead rank is an error.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
    try {
      work->wait(timeout_);
    } catch (const std::exception& e) {
      throw CommError(fmt::format(
          "[comm] rank {} of {}: {} failed or timed out after {} ms: {}; {}", rank_, world_size_,
          what, timeout_.count(), presence_->ranks_that_left(), error_text(e)));
    }
  }

  std::string backend_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  c10::Device device_;
  c10::intrusive_ptr<Group> group_;
  std::unique_ptr<detail::RankPresence> presence_;
  bool reduce_scatter_supported_ =
      true;  ///< false once the group said it has none  // after group_: it leaves first
};

}  // namespace bertlab
