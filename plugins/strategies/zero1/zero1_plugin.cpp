// The `zero1` strategy: ZeRO stage 1 (Rajbhandari et al. 2020; PyTorch's ZeroRedundancyOptimizer
// as the behavioural reference for the partition). Every parameter belongs to one rank; the
// averaged gradients are reduce-scattered so that each rank receives those of its parameters,
// each rank's optimizer updates only them (and so holds only their state: 1/N of it, ± one
// parameter's), and the updated parameters are all-gathered. The partition is over whole
// parameters, greedy by size (largest first, to the rank holding least so far), the same on
// every rank: a parameter that would straddle two ranks' equal shares belongs to one of them,
// so per-parameter optimizer quantities (LAMB's trust ratio) are computed on whole parameters,
// and global-norm clipping sees the whole gradient (GradientSet::set_shard_of).
// Contract: exact + optimizer_state_sharded.

#include <ATen/ATen.h>
#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace bertlab::zero1 {

namespace {

/// Where one parameter lies in its owner's chunk of the exchange buffer: a presence flag (the
/// parameter has a gradient on some rank), then its elements.
struct Slot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int owner = 0;
  int64_t flag = 0;  ///< offset of the presence flag in the owner's chunk
  int64_t data = 0;  ///< offset of the first element in the owner's chunk
};

/// Greedy by size: the largest parameter first, each to the rank that holds the fewest elements
/// so far (the lowest rank on a tie). Every rank ends within one parameter of total / N.
std::vector<int> partition(const std::vector<int64_t>& sizes, int world) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<int64_t> load(static_cast<size_t>(world), 0);
  std::vector<int> owner(sizes.size(), 0);
  for (size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    owner[i] = static_cast<int>(least);
    load[static_cast<size_t>(least)] += sizes[i];
  }
  return owner;
}

class Zero1Strategy final : public Strategy {
 public:
  explicit Zero1Strategy(bool unsharded) : unsharded_(unsharded) {}

  std::vector<bool> optimizer_shard(const std::vector<NamedTensor>& parameters, int rank,
                                    int world_size) override {
    rank_ = rank;
    world_ = world_size;
    slots_.clear();
    index_.clear();
    std::vector<int64_t> sizes;
    for (const auto& p : parameters) sizes.push_back(p.tensor.numel());
    const std::vector<int> owner = partition(sizes, world_size);
    std::vector<int64_t> flags(static_cast<size_t>(world_size), 0);
    std::vector<int64_t> elements(static_cast<size_t>(world_size), 0);
    for (size_t i = 0; i < parameters.size(); ++i) ++flags[static_cast<size_t>(owner[i])];
    for (size_t i = 0; i < parameters.size(); ++i) {
      Slot s;
      s.name = parameters[i].name;
      s.shape = parameters[i].tensor.sizes().vec();
      s.numel = sizes[i];
      s.owner = owner[i];
      const auto r = static_cast<size_t>(s.owner);
      s.flag = static_cast<int64_t>(std::count(owner.begin(), owner.begin() + i, s.owner));
      s.data = flags[r] + elements[r];
      elements[r] += s.numel;
      index_[s.name] = slots_.size();
      slots_.push_back(std::move(s));
    }
    chunk_ = 0;
    for (int r = 0; r < world_size; ++r) {
      chunk_ = std::max(chunk_, flags[static_cast<size_t>(r)] + elements[static_cast<size_t>(r)]);
    }
    std::vector<bool> mine(parameters.size(), true);
    if (unsharded_) return mine;  // the emulation: every rank keeps the whole state
    for (size_t i = 0; i < parameters.size(); ++i) mine[i] = owner[i] == rank;
    return mine;
  }

  void reduce_gradients(GradientSet& grads, Communicator& comm) override {
    grads.densify();
    if (comm.world_size() == 1) return;
    if (unsharded_) {
      all_reduce_mean_dense(grads, comm, 25.0);
      return;
    }
    check_partition(comm);
    const at::Tensor buffer = exchange_buffer(grads, /*every_rank=*/true);
    comm.set_traffic(Traffic::kDense);
    at::Tensor mine = comm.reduce_scatter_sum(buffer);
    comm.set_traffic(Traffic::kOther);
    const double n = comm.world_size();
    GradientSet shard;
    double squares = 0.0;
    for (const Slot& s : slots_) {
      if (s.owner != rank_ || mine[s.flag].item<double>() == 0.0) continue;
      GradientEntry e;
      e.name = s.name;
      e.shape = s.shape;
      e.dense = mine.narrow(0, s.data, s.numel).div_(n).view(s.shape);
      squares += e.dense.to(at::kDouble).pow(2).sum().item<double>();
      shard.add(std::move(e));
    }
    // The whole gradient's sum of squares, added in rank order: the same on every rank.
    double total = 0.0;
    for (const auto& r : comm.all_gather(at::tensor({squares}, at::kDouble))) {
      total += r.item<double>();
    }
    shard.set_shard_of(total);
    grads = std::move(shard);
  }

  bool after_update(const std::vector<NamedTensor>& parameters, Communicator& comm,
                    int64_t /*step*/) override {
    if (comm.world_size() == 1 || unsharded_) return true;
    check_partition(comm);
    at::NoGradGuard no_grad;
    BERTLAB_CHECK(parameters.size() == slots_.size(),
                  "zero1: {} parameters after the update, {} partitioned", parameters.size(),
                  slots_.size());
    at::Tensor mine = at::zeros({chunk_}, parameters.front().tensor.options());
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      if (s.owner == rank_) mine.narrow(0, s.data, s.numel).copy_(parameters[i].tensor.reshape(-1));
    }
    comm.set_traffic(Traffic::kDense);
    const std::vector<at::Tensor> all = comm.all_gather(mine);
    comm.set_traffic(Traffic::kOther);
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      if (s.owner == rank_) continue;
      parameters[i].tensor.detach().copy_(
          all[static_cast<size_t>(s.owner)].narrow(0, s.data, s.numel).view(s.shape));
    }
    return true;
  }

  void complete_gradients(GradientSet& grads, Communicator& comm) override {
    if (comm.world_size() == 1 || unsharded_) return;
    check_partition(comm);
    const at::Tensor mine = exchange_buffer(grads, /*every_rank=*/false);
    const std::vector<at::Tensor> all = comm.all_gather(mine);
    GradientSet whole;
    for (const Slot& s : slots_) {
      const at::Tensor& chunk = all[static_cast<size_t>(s.owner)];
      if (chunk[s.flag].item<double>() == 0.0) continue;
      GradientEntry e;
      e.name = s.name;
      e.shape = s.shape;
      e.dense = chunk.narrow(0, s.data, s.numel).view(s.shape).clone();
      whole.add(std::move(e));
    }
    grads = std::move(whole);
  }

 private:
  void check_partition(const Communicator& comm) const {
    BERTLAB_CHECK(!slots_.empty() && world_ == comm.world_size() && rank_ == comm.rank(),
                  "zero1: the host did not call optimizer_shard for rank {} of {} before the "
                  "first step",
                  comm.rank(), comm.world_size());
  }

  /// `grads` laid out by owner: world_size chunks (every_rank) or this rank's chunk only.
  at::Tensor exchange_buffer(const GradientSet& grads, bool every_rank) const {
    at::ScalarType dtype = at::kFloat;
    at::Device device = at::kCPU;
    if (!grads.entries().empty()) {
      dtype = grads.entries().front().dense.scalar_type();
      device = grads.entries().front().dense.device();
    }
    const int64_t chunks = every_rank ? world_ : 1;
    at::Tensor buffer = at::zeros({chunks * chunk_}, at::TensorOptions().dtype(dtype).device(device));
    for (const auto& e : grads.entries()) {
      auto it = index_.find(e.name);
      BERTLAB_CHECK(it != index_.end(), "zero1: {} has a gradient but is not a parameter", e.name);
      const Slot& s = slots_[it->second];
      BERTLAB_CHECK(e.dense.scalar_type() == dtype,
                    "zero1: the gradients of {} are {} but others are {}; zero1 exchanges one "
                    "type",
                    e.name, c10::toString(e.dense.scalar_type()), c10::toString(dtype));
      const int64_t base = every_rank ? s.owner * chunk_ : 0;
      buffer[base + s.flag] = 1;
      buffer.narrow(0, base + s.data, s.numel).copy_(e.dense.reshape(-1));
    }
    return buffer;
  }

  bool unsharded_;
  int rank_ = 0, world_ = 0;
  std::vector<Slot> slots_;
  std::map<std::string, size_t> index_;
  int64_t chunk_ = 0;  ///< elements of the largest rank's flags and parameters
};

StrategyContract contract(const ConfigView& /*view*/, int /*replicas*/) {
  StrategyContract c;
  c.kind = ContractKind::kExact;
  c.derivation =
      "the gradients are summed over the ranks (a reduce-scatter) and divided by N, as "
      "mirrored's all-reduce; each rank's optimizer updates its own parameters with them, "
      "clipped by the whole gradient's norm, and the parameters are all-gathered: one device's "
      "update up to summation order. The optimizer state is partitioned over whole parameters";
  c.invariants = {Invariant::kOptimizerStateSharded};
  return c;
}

void register_components(Registry& registry) {
  registry.add_strategy(
      ComponentSpec{
          "zero1",
          "ZeRO stage 1: gradients reduce-scattered, each rank updates its shard of the "
          "parameters with its shard of the optimizer state, parameters all-gathered",
          {string_option("emulate", "none",
                         "reproduce a broken sharding: unsharded (every rank keeps and updates "
                         "the whole optimizer state, as mirrored; the update is still exact)")
               .one_of({"none", "unsharded"})},
          contract},
      [](const ConfigView& view) {
        return std::make_unique<Zero1Strategy>(view.get_string("emulate") == "unsharded");
      });
}

}  // namespace

}  // namespace bertlab::zero1

BERTLAB_PLUGIN("zero1", "0.1.0", bertlab::zero1::register_components)
