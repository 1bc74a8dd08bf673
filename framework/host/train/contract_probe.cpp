// The measures of a strategy's contract, taken during gradcheck's steps.

#include "train/contract_probe.h"

#include <ATen/ATen.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>

#include <cmath>
#include <limits>

namespace bertlab {

namespace {

/// The largest of every rank's `value` (NaN wins: a NaN measure is a violation).
double max_over_ranks(double value, Communicator& comm) {
  if (comm.world_size() == 1) return value;
  double worst = value;
  for (const at::Tensor& v : comm.all_gather(at::tensor({value}, at::kDouble))) {
    const double x = v.item<double>();
    if (std::isnan(x) || x > worst) worst = x;
  }
  return worst;
}

double max_abs(const at::Tensor& t) { return t.numel() == 0 ? 0.0 : t.abs().max().item<double>(); }

}  // namespace

void ContractProbe::before_reduce(const GradientSet& local, Communicator& comm) {
  local_.clear();
  exact_mean_.clear();
  abs_mean_.clear();
  // Only a bound and error feedback are measured against the local gradients.
  if (contract_.kind != ContractKind::kBounded &&
      !contract_.claims(Invariant::kErrorFeedbackConserves)) {
    return;
  }
  for (const auto& e : local.entries()) {
    BERTLAB_CHECK(!e.averaged,
                  "gradcheck: {} was averaged during backward (overlap_backward = true), so its "
                  "local gradients are gone and the contract cannot be measured; check the "
                  "variant with overlap_backward = false",
                  e.name);
    local_[e.name] = e.to_dense().detach().to(at::kCPU, at::kDouble).clone();
  }
  if (contract_.kind != ContractKind::kBounded) return;
  std::vector<at::Tensor> sums, abs_sums;
  for (const auto& [name, g] : local_) {
    sums.push_back(g.clone());
    abs_sums.push_back(g.abs());
  }
  comm.set_traffic(Traffic::kOther);
  comm.all_reduce_sum(sums);
  comm.all_reduce_sum(abs_sums);
  const double n = comm.world_size();
  size_t i = 0;
  double abs_squares = 0.0;
  step_.elements = 0;
  for (const auto& [name, g] : local_) {
    exact_mean_[name] = sums[i] / n;
    abs_mean_[name] = abs_sums[i] / n;
    abs_squares += abs_mean_[name].pow(2).sum().item<double>();
    step_.elements += g.numel();
    ++i;
  }
  step_.abs_mean_norm = std::sqrt(abs_squares);
}

void ContractProbe::after_reduce(const GradientSet& averaged, const Strategy& strategy,
                                 Communicator& comm) {
  if (contract_.kind == ContractKind::kBounded) {
    double ratio = 0.0, largest = 0.0;
    for (const auto& e : averaged.entries()) {
      auto it = exact_mean_.find(e.name);
      BERTLAB_CHECK(it != exact_mean_.end(),
                    "gradcheck: the strategy returned a gradient for {}, which had none locally",
                    e.name);
      const at::Tensor r = e.to_dense().detach().to(at::kCPU, at::kDouble);
      if (!at::isfinite(r).all().item<bool>()) {
        ratio = std::numeric_limits<double>::infinity();
        largest = std::numeric_limits<double>::infinity();
        continue;
      }
      const at::Tensor diff = (r - it->second).abs();
      const at::Tensor bound = contract_.atol + contract_.rtol * abs_mean_.at(e.name);
      // 0/0 (no difference, no room) is 0; a difference without room is infinitely over.
      const at::Tensor over =
          at::where(bound > 0, diff / bound,
                    at::where(diff > 0, at::full_like(diff, INFINITY), at::zeros_like(diff)));
      ratio = std::max(ratio, max_abs(over));
      largest = std::max(largest, max_abs(diff));
    }
    step_.bound_ratio = max_over_ranks(ratio, comm);
    step_.max_from_exact = max_over_ranks(largest, comm);
  }
  if (contract_.claims(Invariant::kErrorFeedbackConserves)) {
    double worst = 0.0;
    const auto records = strategy.last_error_feedback();
    for (const auto& rec : records) {
      auto it = local_.find(rec.name);
      BERTLAB_CHECK(it != local_.end(),
                    "gradcheck: the strategy reported error feedback for {}, which had no local "
                    "gradient",
                    rec.name);
      const auto d = [](const at::Tensor& t) { return t.detach().to(at::kCPU, at::kDouble); };
      const at::Tensor input = it->second + d(rec.residual_before).reshape(it->second.sizes());
      const at::Tensor kept =
          d(rec.sent).reshape(input.sizes()) + d(rec.residual_after).reshape(input.sizes());
      const double scale = max_abs(input);
      const double miss = max_abs(input - kept);
      const double rel = scale > 0 ? miss / scale : (miss > 0 ? INFINITY : 0.0);
      if (std::isnan(rel) || rel > worst) worst = rel;
    }
    step_.error_feedback = max_over_ranks(worst, comm);
    step_.error_feedback_entries =
        static_cast<int64_t>(max_over_ranks(static_cast<double>(records.size()), comm));
  }
}

void ContractProbe::after_update(bool synced, const std::vector<NamedTensor>& parameters,
                                 const Optimizer& optimizer, Communicator& comm) {
  step_.synced = synced;
  if (contract_.claims(Invariant::kOptimizerStateSharded)) {
    measure_state_share(parameters, optimizer, comm);
  }
  if (!synced || !contract_.claims(Invariant::kReplicasEqualAfterSync) || comm.world_size() == 1) {
    return;
  }
  double worst = 0.0;
  for (const auto& p : parameters) {
    const at::Tensor mine = p.tensor.detach().to(at::kCPU).reshape({-1}).contiguous();
    const auto all = comm.all_gather(mine);
    for (const auto& other : all) {
      const double d = max_abs(other.to(at::kDouble) - all.front().to(at::kDouble));
      if (std::isnan(d) || d > worst) worst = d;
    }
  }
  step_.sync_difference = worst;
}

void ContractProbe::measure_state_share(const std::vector<NamedTensor>& parameters,
                                        const Optimizer& optimizer, Communicator& comm) {
  // Elements of state this rank holds per parameter ("<parameter>/<slot>" names).
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < parameters.size(); ++i) index[parameters[i].name] = i;
  at::Tensor held = at::zeros({static_cast<int64_t>(parameters.size())}, at::kDouble);
  for (const auto& [name, t] : optimizer.state_dict()) {
    auto it = index.find(name.substr(0, name.rfind('/')));
    BERTLAB_CHECK(it != index.end(),
                  "gradcheck: the optimizer's state {} names no parameter of the model", name);
    held[static_cast<int64_t>(it->second)] += static_cast<double>(t.numel());
  }
  const at::Tensor all = at::stack(comm.all_gather(held));  // [ranks, parameters]
  const at::Tensor per_rank = all.sum(1);
  const double total = per_rank.sum().item<double>();
  const double largest = all.max().item<double>();
  const double mean = total / static_cast<double>(comm.world_size());
  const double off = (per_rank - mean).abs().max().item<double>();
  step_.state_share = largest > 0 ? off / largest : 0.0;
  step_.state_shared_parameters = all.gt(0).sum(0).gt(1).sum().item<int64_t>();
  step_.state_elements_max = static_cast<int64_t>(per_rank.max().item<double>());
  step_.state_elements_total = static_cast<int64_t>(total);
  step_.state_elements_largest = static_cast<int64_t>(largest);
}

ContractMeasures ContractProbe::take() {
  ContractMeasures out = step_;
  step_ = ContractMeasures{};
  return out;
}

}  // namespace bertlab
