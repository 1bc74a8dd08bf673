#include "lamb.h"

#include <bertlab/error.h>
#include <bertlab/log.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>

namespace bertlab::lamb {

LambOptions::LambOptions() { schedule.learning_rate = 1e-3; }

std::vector<OptionDecl> LambOptions::declarations() {
  const LambOptions d;
  std::vector<OptionDecl> decls = d.common_declarations();
  decls.push_back(
      bool_option("bias_correction", d.bias_correction, "divide the moments by 1 - beta^t"));
  return decls;
}

LambOptions LambOptions::from_config(const ConfigView& view) {
  LambOptions o;
  o.read_common(view);
  o.bias_correction = view.get_bool("bias_correction");
  o.validate();
  return o;
}

void LambOptions::validate() const { validate_common(); }

Lamb::Lamb(LambOptions options) : options_(std::move(options)) { options_.validate(); }

void Lamb::init(const std::vector<NamedTensor>& parameters, const OptimizerContext& ctx) {
  schedule_ = Schedule(options_.schedule, ctx.num_train_steps);
  index_.reset(parameters, "lamb");
  slots_.clear();
  c10::NoGradGuard no_grad;
  for (const auto& p : parameters) {
    Slot slot;
    slot.param = p.tensor;
    slot.m = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
    slot.v = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
    slot.decay = options_.exclusion.decays(p.name, options_.adam.weight_decay_rate);
    slots_.push_back(std::move(slot));
  }
  log_info("train", "lamb: {} parameters, {} steps, {}", slots_.size(), schedule_.num_train_steps(),
           schedule_.describe());
}

StepStats Lamb::step(GradientSet& grads, int64_t step) {
  BERTLAB_CHECK(schedule_.num_train_steps() > 0, "lamb: step() before init()");
  StepStats stats;
  stats.learning_rate = schedule_.at(step);
  stats.grad_norm = options_.clip.apply(grads);
  // A non-finite gradient: no update; the host reports it ([train] on_nonfinite).
  if (!std::isfinite(stats.grad_norm)) return stats;
  const AdamHyperparameters& o = options_.adam;
  const auto t = static_cast<double>(step + 1);
  const double correction_1 = options_.bias_correction ? 1.0 - std::pow(o.beta_1, t) : 1.0;
  const double correction_2 = options_.bias_correction ? 1.0 - std::pow(o.beta_2, t) : 1.0;
  c10::NoGradGuard no_grad;
  // A parameter without an entry is left alone, as apply_gradients skips a None gradient.
  for (const auto& entry : grads.entries()) {
    Slot& slot = slots_[index_.at(entry)];
    const at::Tensor grad = entry.is_sparse() ? entry.to_dense() : entry.dense;
    slot.m.mul_(o.beta_1).add_(grad, 1.0 - o.beta_1);
    slot.v.mul_(o.beta_2).addcmul_(grad, grad, 1.0 - o.beta_2);
    at::Tensor update =
        (slot.m / correction_1).div_((slot.v / correction_2).sqrt_().add_(o.epsilon));
    // The layer adaptation: ‖w‖ / ‖update‖, 1 where either norm is 0. Excluded parameters
    // keep ratio 1, as apex applies the ratio only where weight decay is on.
    slot.trust_ratio = 1.0;
    if (slot.decay) {
      update.add_(slot.param, o.weight_decay_rate);
      const double w_norm = slot.param.norm().item<double>();
      const double u_norm = update.norm().item<double>();
      if (w_norm > 0 && u_norm > 0) slot.trust_ratio = w_norm / u_norm;
    }
    slot.param.add_(update, -stats.learning_rate * slot.trust_ratio);
  }
  return stats;
}

double Lamb::last_trust_ratio(const std::string& name) const {
  return slots_[index_.at(name)].trust_ratio;
}

std::vector<std::pair<std::string, at::Tensor>> Lamb::state_dict() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const std::string& name = index_.name(i);
    out.emplace_back(name + "/exp_avg", slots_[i].m.detach().to(at::kCPU).clone());
    out.emplace_back(name + "/exp_avg_sq", slots_[i].v.detach().to(at::kCPU).clone());
  }
  return out;
}

void Lamb::load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::vector<SlotRef> targets;
  for (size_t i = 0; i < slots_.size(); ++i) {
    targets.push_back({index_.name(i) + "/exp_avg", &slots_[i].m});
    targets.push_back({index_.name(i) + "/exp_avg_sq", &slots_[i].v});
  }
  load_slots(state, targets, "lamb");
}

int64_t Lamb::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : slots_) bytes += static_cast<int64_t>(s.m.nbytes() + s.v.nbytes());
  return bytes;
}

}  // namespace bertlab::lamb
