// The `topk` strategy, an out-of-tree example of the bertlab plugin SDK: top-k sparsified
// all-reduce with error feedback. Each rank sends only the k largest-magnitude entries of its
// gradient (k = ratio of each parameter's size) and keeps what it did not send as a residual that
// it adds to the next step's gradient, so no part of the gradient is lost, only delayed (Seide et
// al. 2014, "1-bit SGD"; Stich et al. 2018, "Sparsified SGD with memory"). The ranks exchange the
// selected (index, value) pairs with two all-gathers and each sums every rank's pairs and
// divides by N: the update is identical on every rank, but it is not `mirrored`'s exact mean
// unless ratio = 1.

#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace topk {

namespace {

struct TopkOptions {
  double ratio = 0.01;         ///< fraction of each parameter's entries sent per step, in (0, 1]
  bool error_feedback = true;  ///< keep the unsent part and add it to the next step's gradient
};

class TopkStrategy final : public bertlab::Strategy {
 public:
  explicit TopkStrategy(TopkOptions options) : options_(options) {}

  void reduce_gradients(bertlab::GradientSet& grads, bertlab::Communicator& comm) override {
    grads.densify();
    // This rank's selection, every parameter flattened into one index space: parameter i's
    // entries occupy [offset_i, offset_i + numel_i).
    std::vector<at::Tensor> indices;  // [parameter] int64 indices into the flat space
    std::vector<at::Tensor> values;   // [parameter] the selected entries
    int64_t offset = 0;
    records_.clear();
    for (auto& entry : grads.entries()) {
      at::Tensor flat = entry.dense.reshape({-1});
      auto& residual = residuals_[entry.name];  // [numel] what this rank has not sent yet
      bertlab::ErrorFeedbackRecord record;
      record.name = entry.name;
      record.residual_before = residual.defined() ? residual.clone() : torch::zeros_like(flat);
      if (options_.error_feedback && residual.defined()) flat = flat + residual;
      const int64_t k = entry_k(flat.numel());
      at::Tensor selected = std::get<1>(flat.abs().topk(k, /*dim=*/0, /*largest=*/true,
                                                        /*sorted=*/false));
      values.push_back(flat.index_select(0, selected));
      indices.push_back(selected + offset);
      if (options_.error_feedback) residual = flat.index_fill(0, selected, 0.0);
      // What this rank contributed: its selected entries, zeros elsewhere.
      record.sent = torch::zeros_like(flat).index_copy_(0, selected, values.back());
      record.residual_after = residual.defined() ? residual.clone() : torch::zeros_like(flat);
      records_.push_back(std::move(record));
      offset += flat.numel();
    }
    if (indices.empty()) return;
    // k depends only on each parameter's size, so every rank sends tensors of the same shape.
    comm.set_traffic(bertlab::Traffic::kSparse);
    std::vector<at::Tensor> all_indices = comm.all_gather(torch::cat(indices));
    std::vector<at::Tensor> all_values = comm.all_gather(torch::cat(values));
    comm.set_traffic(bertlab::Traffic::kOther);

    at::Tensor sum = torch::zeros({offset}, all_values.front().options());
    for (size_t r = 0; r < all_indices.size(); ++r)
      sum.index_add_(0, all_indices[r], all_values[r]);
    sum.div_(static_cast<double>(comm.world_size()));
    offset = 0;
    for (auto& entry : grads.entries()) {
      const int64_t n = entry.dense.numel();
      entry.dense = sum.narrow(0, offset, n).view(entry.dense.sizes()).clone();
      offset += n;
    }
  }

  /// The SDK's hook for gradcheck's error_feedback_conserves: per parameter, the residual
  /// carried in, the entries sent and the residual kept.
  std::vector<bertlab::ErrorFeedbackRecord> last_error_feedback() const override {
    return records_;
  }

  /// The residuals are state: a resumed run continues with them.
  std::vector<std::pair<std::string, at::Tensor>> state_dict() const override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& [name, r] : residuals_) {
      if (r.defined()) out.emplace_back(name + "/residual", r.cpu().clone());
    }
    return out;
  }

  void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    residuals_.clear();
    for (const auto& [key, t] : state) {
      const std::string suffix = "/residual";
      if (key.size() <= suffix.size() ||
          key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) {
        throw bertlab::Error("topk state: unexpected tensor '" + key + "'");
      }
      residuals_[key.substr(0, key.size() - suffix.size())] = t.clone();
    }
  }

 private:
  int64_t entry_k(int64_t numel) const {
    const auto k = static_cast<int64_t>(std::ceil(options_.ratio * static_cast<double>(numel)));
    return std::max<int64_t>(1, std::min(k, numel));
  }

  TopkOptions options_;
  std::map<std::string, at::Tensor> residuals_;  // [parameter name] flat residual of this rank
  std::vector<bertlab::ErrorFeedbackRecord> records_;  // the last step's, per parameter
};

/// Top-k's contract. It makes no claim about the average (it is not within any tolerance of
/// the exact mean: with ratio 0.01 most entries are zero), so "exact until step 0"; with error
/// feedback it claims that nothing is lost: g + residual = sent + new residual on every rank.
bertlab::StrategyContract contract(const bertlab::ConfigView& view, int /*replicas*/) {
  bertlab::StrategyContract c;
  c.kind = bertlab::ContractKind::kExactUntil;
  c.until_step = 0;
  c.derivation =
      "a top-k selection is not within a tolerance of the mean; error feedback keeps "
      "every entry not sent for the next step";
  if (view.get_bool("error_feedback")) {
    c.invariants = {bertlab::Invariant::kErrorFeedbackConserves};
  }
  return c;
}

/// ratio in (0, 1]: a rank must send something, and cannot send more than everything.
bertlab::OptionDecl ratio_option() {
  bertlab::OptionDecl ratio =
      bertlab::float_option("ratio", 0.01,
                            "fraction of each parameter's entries a rank sends "
                            "per step")
          .above(0);
  ratio.max = 1.0;
  return ratio;
}

void register_components(bertlab::Registry& registry) {
  registry.add_strategy(
      bertlab::ComponentSpec{
          "topk",
          "data-parallel replicas; each sends its top-k gradient entries, keeps the rest as "
          "error feedback",
          {ratio_option(),
           bertlab::bool_option("error_feedback", true,
                                "add what was not sent to the next step's gradient")},
          contract},
      [](const bertlab::ConfigView& view) {
        TopkOptions options;
        options.ratio = view.get_float("ratio");
        options.error_feedback = view.get_bool("error_feedback");
        return std::make_unique<TopkStrategy>(options);
      });
}

}  // namespace

}  // namespace topk

BERTLAB_PLUGIN("topk", "0.1.0", topk::register_components)
