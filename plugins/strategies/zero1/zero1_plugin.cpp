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

/// A flat tensor per parameter (undefined: no tensor for it on this rank).
using Sources = std::vector<at::Tensor>;

class Zero1Strategy final : public Strategy {
 public:
  Zero1Strategy(bool unsharded, double bucket_mb) : unsharded_(unsharded), bucket_mb_(bucket_mb) {}

  std::vector<bool> optimizer_shard(const std::vector<NamedTensor>& parameters, int rank,
                                    int world_size) override {
    rank_ = rank;
    world_ = world_size;
    slots_.clear();
    index_.clear();
    owned_.assign(static_cast<size_t>(world_size), {});
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
      s.flag = static_cast<int64_t>(owned_[r].size());
      s.data = flags[r] + elements[r];
      elements[r] += s.numel;
      owned_[r].push_back(i);
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
      all_reduce_mean_dense(grads, comm, bucket_mb_);
      return;
    }
    check_partition(comm);
    const Sources local = sources(grads);
    const at::TensorOptions options = tensor_options(local);
    // This rank's parameters' sums and presence flags, filled bucket by bucket.
    Sources sums(slots_.size());
    for (size_t i : owned_[static_cast<size_t>(rank_)]) {
      sums[i] = at::empty({slots_[i].numel}, options);
    }
    at::Tensor present = at::zeros({static_cast<int64_t>(slots_.size())}, at::kDouble);
    comm.set_traffic(Traffic::kDense);
    for (int64_t lo = 0; lo < chunk_; lo += bucket_elements()) {
      const int64_t len = std::min(bucket_elements(), chunk_ - lo);
      at::Tensor input = scratch(world_ * len, options);
      for (int r = 0; r < world_; ++r) pack(r, lo, len, local, input.narrow(0, r * len, len));
      unpack(rank_, lo, len, comm.reduce_scatter_sum(input), sums, present);
    }
    comm.set_traffic(Traffic::kOther);
    const double n = comm.world_size();
    GradientSet shard;
    double squares = 0.0;
    for (size_t i : owned_[static_cast<size_t>(rank_)]) {
      if (present[static_cast<int64_t>(i)].item<double>() == 0.0) continue;
      GradientEntry e;
      e.name = slots_[i].name;
      e.shape = slots_[i].shape;
      e.dense = sums[i].div_(n).view(e.shape);
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
    BERTLAB_CHECK(parameters.size() == slots_.size(),
                  "zero1: {} parameters after the update, {} partitioned", parameters.size(),
                  slots_.size());
    at::NoGradGuard no_grad;
    Sources flat(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) flat[i] = parameters[i].tensor.detach().view(-1);
    comm.set_traffic(Traffic::kDense);
    gather_owned(flat, flat, comm);
    comm.set_traffic(Traffic::kOther);
    return true;
  }

  void complete_gradients(GradientSet& grads, Communicator& comm) override {
    if (comm.world_size() == 1 || unsharded_) return;
    check_partition(comm);
    const Sources mine = sources(grads);
    const at::TensorOptions options = tensor_options(mine);
    Sources whole(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) {
      whole[i] = slots_[i].owner == rank_ ? mine[i] : at::empty({slots_[i].numel}, options);
    }
    const at::Tensor present = gather_owned(mine, whole, comm);
    GradientSet out;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (present[static_cast<int64_t>(i)].item<double>() == 0.0) continue;
      GradientEntry e;
      e.name = slots_[i].name;
      e.shape = slots_[i].shape;
      e.dense = whole[i].view(e.shape).clone();
      out.add(std::move(e));
    }
    grads = std::move(out);
  }

 private:
  void check_partition(const Communicator& comm) const {
    BERTLAB_CHECK(!slots_.empty() && world_ == comm.world_size() && rank_ == comm.rank(),
                  "zero1: the host did not call optimizer_shard for rank {} of {} before the "
                  "first step",
                  comm.rank(), comm.world_size());
  }

  /// `n` elements of a buffer kept from call to call (fresh pages cost more than the copies).
  at::Tensor scratch(int64_t n, const at::TensorOptions& options) const {
    if (!scratch_.defined() || scratch_.numel() < n || scratch_.dtype() != options.dtype() ||
        scratch_.device() != options.device()) {
      scratch_ = at::empty({n}, options);
    }
    return scratch_.narrow(0, 0, n);
  }

  /// Elements of one owner's chunk per collective: bucket_mb MiB of float32.
  int64_t bucket_elements() const {
    return std::max<int64_t>(1, static_cast<int64_t>(bucket_mb_ * (1 << 20) / 4));
  }

  /// `grads`' flat dense tensors by parameter (undefined where there is no entry).
  Sources sources(const GradientSet& grads) const {
    Sources out(slots_.size());
    for (const auto& e : grads.entries()) {
      auto it = index_.find(e.name);
      BERTLAB_CHECK(it != index_.end(), "zero1: {} has a gradient but is not a parameter", e.name);
      out[it->second] = e.dense.reshape(-1);
    }
    return out;
  }

  /// The type and device of the exchange: the tensors', which must agree.
  at::TensorOptions tensor_options(const Sources& tensors) const {
    at::TensorOptions options = at::TensorOptions().dtype(at::kFloat);
    const at::Tensor* first = nullptr;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!tensors[i].defined()) continue;
      if (first == nullptr) {
        first = &tensors[i];
        options = first->options();
      }
      BERTLAB_CHECK(tensors[i].scalar_type() == first->scalar_type(),
                    "zero1: the gradients of {} are {} but others are {}; zero1 exchanges one "
                    "type",
                    slots_[i].name, c10::toString(tensors[i].scalar_type()),
                    c10::toString(first->scalar_type()));
    }
    return options;
  }

  /// Owner `r`'s chunk, elements [lo, lo + len): its parameters' presence flags (1 where
  /// `from` has a tensor), then their elements from `from` (zeros where it has none, and past
  /// the chunk's end).
  void pack(int r, int64_t lo, int64_t len, const Sources& from, at::Tensor out) const {
    out.zero_();
    const int64_t hi = lo + len;
    for (size_t i : owned_[static_cast<size_t>(r)]) {
      const Slot& s = slots_[i];
      if (!from[i].defined()) continue;
      if (s.flag >= lo && s.flag < hi) out[s.flag - lo] = 1;
      const int64_t a = std::max(lo, s.data), b = std::min(hi, s.data + s.numel);
      if (a < b) out.narrow(0, a - lo, b - a).copy_(from[i].narrow(0, a - s.data, b - a));
    }
  }

  /// The inverse of pack for owner `r`: elements into `to` (defined tensors only), flags into
  /// `present` (a parameter present where its flag is non-zero).
  void unpack(int r, int64_t lo, int64_t len, const at::Tensor& in, Sources& to,
              at::Tensor& present) const {
    const int64_t hi = lo + len;
    for (size_t i : owned_[static_cast<size_t>(r)]) {
      const Slot& s = slots_[i];
      if (s.flag >= lo && s.flag < hi) {
        present[static_cast<int64_t>(i)] = in[s.flag - lo].item<double>() != 0.0 ? 1.0 : 0.0;
      }
      const int64_t a = std::max(lo, s.data), b = std::min(hi, s.data + s.numel);
      if (a < b && to[i].defined()) {
        to[i].narrow(0, a - s.data, b - a).copy_(in.narrow(0, a - lo, b - a));
      }
    }
  }

  /// Every owner's parameters from its `from` into every rank's `to`, bucket by bucket; returns
  /// which are present anywhere. Each bucket is gathered by an all-reduce of every owner's
  /// piece laid among zeros (x + 0 = x: exact): Gloo's all-gather in libtorch 1.13 moves bytes
  /// at a twelfth of its all-reduce's rate (bench comm, 420 MB: 0.085 vs 1.07 GB/s), so this
  /// is faster here despite twice the bytes.
  at::Tensor gather_owned(const Sources& from, Sources& to, Communicator& comm) const {
    const at::TensorOptions options = tensor_options(from);
    at::Tensor present = at::zeros({static_cast<int64_t>(slots_.size())}, at::kDouble);
    for (int64_t lo = 0; lo < chunk_; lo += bucket_elements()) {
      const int64_t len = std::min(bucket_elements(), chunk_ - lo);
      at::Tensor all = scratch(world_ * len, options);
      all.zero_();
      pack(rank_, lo, len, from, all.narrow(0, rank_ * len, len));
      std::vector<at::Tensor> one{all};
      comm.all_reduce_sum(one);
      for (int r = 0; r < world_; ++r) unpack(r, lo, len, all.narrow(0, r * len, len), to, present);
    }
    return present;
  }

  bool unsharded_;
  double bucket_mb_;
  int rank_ = 0, world_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::vector<size_t>> owned_;  ///< [rank]: its parameters, in parameter order
  std::map<std::string, size_t> index_;
  int64_t chunk_ = 0;           ///< elements of the largest rank's flags and parameters
  mutable at::Tensor scratch_;  ///< the buckets' buffer
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
          "parameters with its shard of the optimizer state, parameters gathered",
          {float_option("bucket_mb", 25.0,
                        "MiB of each rank's chunk per reduce-scatter and per parameter gather")
               .above(0),
           string_option("emulate", "none",
                         "reproduce a broken sharding: unsharded (every rank keeps and updates "
                         "the whole optimizer state, as mirrored; the update is still exact)")
               .one_of({"none", "unsharded"})},
          contract},
      [](const ConfigView& view) {
        return std::make_unique<Zero1Strategy>(view.get_string("emulate") == "unsharded",
                                               view.get_float("bucket_mb"));
      });
}

}  // namespace

}  // namespace bertlab::zero1

BERTLAB_PLUGIN("zero1", "0.1.0", bertlab::zero1::register_components)
