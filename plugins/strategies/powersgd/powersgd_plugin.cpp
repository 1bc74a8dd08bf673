// The `powersgd` strategy: rank-r PowerSGD with error feedback (Vogels, Karimireddy and Jaggi
// 2019, "PowerSGD: Practical Low-Rank Gradient Compression for Distributed Optimization";
// PyTorch's powerSGD_hook as the behavioural reference). Before `start_step` every gradient is
// averaged exactly. From it on, each matrix gradient M (the local gradient plus the residual kept
// from the last step) is sent as two thin matrices: P = M·Q, all-reduced and orthonormalised;
// then Q = Mᵀ·P̂, all-reduced; the average is P̂·Q̄ᵀ. What this rank's compression did not
// send, M − P̂·Qᵀ (its own Q), is its residual; Q̄ warm-starts the next step. Vectors (biases,
// LayerNorm), matrices too small to gain min_compression_rate, and sparse embedding rows are
// averaged exactly. Contract: exact_until(start_step) + error_feedback_conserves.

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>
#include <fmt/format.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace bertlab::powersgd {

namespace {

struct PowerSgdOptions {
  int64_t rank = 1;                    ///< columns of P and Q
  int64_t start_step = 0;              ///< steps before it average exactly
  double min_compression_rate = 2.0;   ///< compress only when n·m / ((n + m)·rank) reaches it
  double bucket_mb = 25.0;             ///< exactly averaged gradients' all-reduce buckets
  uint64_t seed = 0;                   ///< the first Q's draws (the same on every rank)
  bool residual_from_average = false;  ///< emulation of epfml/powersgd#3
};

PowerSgdOptions read_options(const ConfigView& view) {
  PowerSgdOptions o;
  o.rank = view.get_int("rank");
  o.start_step = view.get_int("start_step");
  o.min_compression_rate = view.get_float("min_compression_rate");
  o.bucket_mb = view.get_float("bucket_mb");
  o.seed = static_cast<uint64_t>(view.get_int("seed"));
  o.residual_from_average = view.get_string("emulate") == "residual_from_average";
  return o;
}

/// Orthonormalises the columns of `p` in place (Gram–Schmidt, in order); a column that
/// vanishes stays zero.
void orthonormalize(at::Tensor& p) {
  for (int64_t i = 0; i < p.size(1); ++i) {
    at::Tensor col = p.select(1, i);
    for (int64_t j = 0; j < i; ++j) {
      const at::Tensor prev = p.select(1, j);
      col.sub_(prev * (prev * col).sum());
    }
    const double norm = col.norm().item<double>();
    if (norm > 0) col.div_(norm);
  }
}

/// The state of one compressed matrix on this rank.
struct MatrixState {
  at::Tensor q;         ///< [cols, rank]: the warm start (the last step's Q̄)
  at::Tensor residual;  ///< [rows, cols]: what this rank has not sent yet
};

class PowerSgdStrategy final : public Strategy {
 public:
  explicit PowerSgdStrategy(PowerSgdOptions options) : options_(options) {}

  void begin_step(int64_t step) override { step_ = step; }

  void reduce_gradients(GradientSet& grads, Communicator& comm) override {
    records_.clear();
    // Exactly averaged: everything before start_step; vectors, small matrices and sparse rows.
    GradientSet exact;
    std::vector<GradientEntry*> compressed;
    for (auto& e : grads.entries()) {
      if (step_ >= options_.start_step && compresses(e)) {
        compressed.push_back(&e);
      } else {
        exact.add(e);
      }
    }
    exact.densify();
    all_reduce_mean_dense(exact, comm, options_.bucket_mb);
    for (auto& e : exact.entries()) *grads.find(e.name) = e;
    if (!compressed.empty()) compress_and_average(compressed, comm);
  }

  std::vector<std::pair<std::string, at::Tensor>> state_dict() const override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& [name, s] : state_) {
      out.emplace_back(name + "/q", s.q.to(at::kCPU).clone());
      out.emplace_back(name + "/residual", s.residual.to(at::kCPU).clone());
    }
    return out;
  }

  void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    state_.clear();
    for (const auto& [key, t] : state) {
      const auto slash = key.rfind('/');
      BERTLAB_CHECK(slash != std::string::npos, "powersgd state: unexpected tensor '{}'", key);
      const std::string name = key.substr(0, slash), what = key.substr(slash + 1);
      BERTLAB_CHECK(what == "q" || what == "residual", "powersgd state: unexpected tensor '{}'",
                    key);
      (what == "q" ? state_[name].q : state_[name].residual) = t.clone();
    }
    for (const auto& [name, s] : state_) {
      BERTLAB_CHECK(s.q.defined() && s.residual.defined(),
                    "powersgd state: {} lacks its q or its residual", name);
    }
  }

  std::vector<ErrorFeedbackRecord> last_error_feedback() const override { return records_; }

 private:
  /// Dense matrices whose two thin factors are at least min_compression_rate times smaller.
  bool compresses(const GradientEntry& e) const {
    if (e.is_sparse() || e.averaged || e.shape.size() < 2) return false;
    const int64_t rows = e.shape[0];
    const int64_t cols = e.dense.numel() / std::max<int64_t>(rows, 1);
    const int64_t r = std::min({options_.rank, rows, cols});
    return static_cast<double>(rows * cols) >=
           options_.min_compression_rate * static_cast<double>((rows + cols) * r);
  }

  /// The first Q of a matrix: standard normal draws from the seed and the parameter's name, so
  /// every rank starts from the same Q.
  at::Tensor initial_q(const std::string& name, int64_t cols, int64_t r, const at::Tensor& like) {
    auto gen =
        at::make_generator<at::CPUGeneratorImpl>(options_.seed ^ std::hash<std::string>{}(name));
    return at::randn({cols, r}, gen, at::TensorOptions().dtype(at::kFloat)).to(like.options());
  }

  void compress_and_average(const std::vector<GradientEntry*>& entries, Communicator& comm) {
    const double n = comm.world_size();
    std::vector<at::Tensor> m(entries.size()), ps(entries.size()), qs(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      GradientEntry& e = *entries[i];
      const int64_t rows = e.shape[0];
      const int64_t cols = e.dense.numel() / rows;
      const int64_t r = std::min({options_.rank, rows, cols});
      MatrixState& s = state_[e.name];
      if (!s.q.defined()) s.q = initial_q(e.name, cols, r, e.dense);
      if (!s.residual.defined()) s.residual = at::zeros({rows, cols}, e.dense.options());
      ErrorFeedbackRecord rec;
      rec.name = e.name;
      rec.residual_before = s.residual.clone();
      m[i] = e.dense.reshape({rows, cols}) + s.residual;  // error feedback
      ps[i] = at::matmul(m[i], s.q);
      records_.push_back(std::move(rec));
    }
    comm.set_traffic(Traffic::kDense);
    comm.all_reduce_sum(ps);
    for (auto& p : ps) {
      p.div_(n);
      orthonormalize(p);
    }
    for (size_t i = 0; i < entries.size(); ++i) qs[i] = at::matmul(m[i].t(), ps[i]);
    std::vector<at::Tensor> local_q;
    for (const auto& q : qs) local_q.push_back(q.clone());
    comm.all_reduce_sum(qs);
    comm.set_traffic(Traffic::kOther);
    for (size_t i = 0; i < entries.size(); ++i) {
      GradientEntry& e = *entries[i];
      MatrixState& s = state_[e.name];
      const at::Tensor mean_q = qs[i].div_(n);
      const at::Tensor sent = at::matmul(ps[i], local_q[i].t());
      const at::Tensor average = at::matmul(ps[i], mean_q.t());
      // The residual is what this rank's own compression left out; the emulated bug takes it
      // from the average instead, so the local gradient is no longer conserved.
      s.residual = options_.residual_from_average ? m[i] - average : m[i] - sent;
      s.q = mean_q.clone();
      records_[i].sent = sent;
      records_[i].residual_after = s.residual.clone();
      e.dense = average.reshape(e.dense.sizes()).contiguous();
    }
  }

  PowerSgdOptions options_;
  int64_t step_ = 0;
  std::map<std::string, MatrixState> state_;
  std::vector<ErrorFeedbackRecord> records_;
};

StrategyContract contract(const ConfigView& view, int /*replicas*/) {
  StrategyContract c;
  c.kind = ContractKind::kExactUntil;
  c.until_step = view.get_int("start_step");
  c.derivation =
      "before start_step every gradient is all-reduced exactly; after it the average is a "
      "rank-r approximation, not bounded by any tolerance, while error feedback keeps what was "
      "not sent: g + residual = sent + new residual on every rank";
  c.invariants = {Invariant::kErrorFeedbackConserves};
  return c;
}

void register_components(Registry& registry) {
  registry.add_strategy(
      ComponentSpec{
          "powersgd",
          "PowerSGD: matrix gradients sent as rank-r factors with error feedback after "
          "start_step; vectors and sparse rows averaged exactly",
          {int_option("rank", 1,
                      "columns of the factors P and Q (PyTorch's "
                      "matrix_approximation_rank)")
               .at_least(1),
           int_option("start_step", 0,
                      "steps (0-based) before this one average exactly (PyTorch's "
                      "start_powerSGD_iter)")
               .at_least(0),
           float_option("min_compression_rate", 2.0,
                        "compress a rows × cols matrix only when rows·cols / ((rows + cols)·rank) "
                        "reaches this")
               .at_least(0),
           float_option("bucket_mb", 25.0,
                        "MiB per all-reduce of the exactly averaged "
                        "gradients")
               .above(0),
           int_option("seed", 0, "the first Q's random draws (the same on every rank)"),
           string_option("emulate", "none",
                         "reproduce a published bug: residual_from_average (the error-feedback "
                         "residual taken from the averaged output, epfml/powersgd#3)")
               .one_of({"none", "residual_from_average"})},
          contract},
      [](const ConfigView& view) {
        return std::make_unique<PowerSgdStrategy>(read_options(view));
      });
}

}  // namespace

}  // namespace bertlab::powersgd

BERTLAB_PLUGIN("powersgd", "0.1.0", bertlab::powersgd::register_components)
