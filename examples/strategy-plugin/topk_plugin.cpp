// The `topk` strategy, an out-of-tree example of the bertlab plugin SDK: top-k sparsified
// all-reduce with error feedback. Each rank sends only the k largest-magnitude entries of its
// gradient (k = ratio of each parameter's size) and keeps what it did not send as a residual that
// it adds to the next step's gradient, so no part of the gradient is lost, only delayed (Seide et
// al. 2014, "1-bit SGD"; Stich et al. 2018, "Sparsified SGD with memory"). The ranks exchange the
// selected (index, value) pairs with two all-gathers and each sums every rank's pairs and
// divides by N: the update is identical on every rank, but it is not `mirrored`'s exact mean
// unless ratio = 1.

#include <bertlab/communicator.h>
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
    for (auto& entry : grads.entries()) {
      at::Tensor flat = entry.dense.reshape({-1});
      auto& residual = residuals_[entry.name];  // [numel] what this rank has not sent yet
      if (options_.error_feedback && residual.defined()) flat = flat + residual;
      const int64_t k = entry_k(flat.numel());
      at::Tensor selected = std::get<1>(flat.abs().topk(k, /*dim=*/0, /*largest=*/true,
                                                        /*sorted=*/false));
      values.push_back(flat.index_select(0, selected));
      indices.push_back(selected + offset);
      if (options_.error_feedback) residual = flat.index_fill(0, selected, 0.0);
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

 private:
  int64_t entry_k(int64_t numel) const {
    const auto k = static_cast<int64_t>(std::ceil(options_.ratio * static_cast<double>(numel)));
    return std::max<int64_t>(1, std::min(k, numel));
  }

  TopkOptions options_;
  std::map<std::string, at::Tensor> residuals_;  // [parameter name] flat residual of this rank
};

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
                                "add what was not sent to the next step's gradient")}},
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
