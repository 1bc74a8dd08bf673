#include "adamw.h"

#include <bertlab/error.h>
#include <bertlab/log.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>

namespace bertlab::adamw {

AdamWOptions::AdamWOptions() {
  schedule.learning_rate = 1e-3;
  adam.epsilon = 1e-8;
}

std::vector<OptionDecl> AdamWOptions::declarations() {
  const AdamWOptions d;
  std::vector<OptionDecl> decls = d.common_declarations();
  decls.push_back(
      bool_option("amsgrad", d.amsgrad, "AMSGrad: the denominator from the running maximum of v"));
  return decls;
}

AdamWOptions AdamWOptions::from_config(const ConfigView& view) {
  AdamWOptions o;
  o.read_common(view);
  o.amsgrad = view.get_bool("amsgrad");
  o.validate();
  return o;
}

void AdamWOptions::validate() const { validate_common(); }

AdamW::AdamW(AdamWOptions options) : options_(std::move(options)) { options_.validate(); }

void AdamW::init(const std::vector<NamedTensor>& parameters, const OptimizerContext& ctx) {
  schedule_ = Schedule(options_.schedule, ctx.num_train_steps);
  index_.reset(parameters, "adamw");
  slots_.clear();
  c10::NoGradGuard no_grad;
  for (const auto& p : parameters) {
    Slot slot;
    slot.param = p.tensor;
    slot.m = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
    slot.v = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
    if (options_.amsgrad) slot.v_max = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
    slot.steps = at::zeros({}, at::kLong);
    slot.decay = options_.exclusion.decays(p.name, options_.adam.weight_decay_rate);
    slots_.push_back(std::move(slot));
  }
  log_info("train", "adamw: {} parameters, {} steps, {}", slots_.size(),
           schedule_.num_train_steps(), schedule_.describe());
}

StepStats AdamW::step(GradientSet& grads, int64_t step) {
  BERTLAB_CHECK(schedule_.num_train_steps() > 0, "adamw: step() before init()");
  StepStats stats;
  const double lr = schedule_.at(step);
  stats.learning_rate = lr;
  stats.grad_norm = options_.clip.apply(grads);
  // A non-finite gradient: no update; the host reports it ([train] on_nonfinite).
  if (!std::isfinite(stats.grad_norm)) return stats;
  const AdamHyperparameters& h = options_.adam;
  c10::NoGradGuard no_grad;
  for (const auto& entry : grads.entries()) {
    Slot& slot = slots_[index_.at(entry)];
    const at::Tensor grad = entry.is_sparse() ? entry.to_dense() : entry.dense;
    // In torch.optim.AdamW's order: decay, moments, bias-corrected denominator, step.
    if (slot.decay) slot.param.mul_(1.0 - lr * h.weight_decay_rate);
    const int64_t t = slot.steps.item<int64_t>() + 1;
    slot.steps.fill_(t);
    const double correction_1 = 1.0 - std::pow(h.beta_1, static_cast<double>(t));
    const double correction_2 = 1.0 - std::pow(h.beta_2, static_cast<double>(t));
    slot.m.mul_(h.beta_1).add_(grad, 1.0 - h.beta_1);
    slot.v.mul_(h.beta_2).addcmul_(grad, grad, 1.0 - h.beta_2);
    at::Tensor denom;
    if (options_.amsgrad) {
      at::maximum_out(slot.v_max, slot.v_max, slot.v);
      denom = (slot.v_max.sqrt() / std::sqrt(correction_2)).add_(h.epsilon);
    } else {
      denom = (slot.v.sqrt() / std::sqrt(correction_2)).add_(h.epsilon);
    }
    slot.param.addcdiv_(slot.m, denom, -lr / correction_1);
  }
  return stats;
}

std::vector<std::pair<std::string, at::Tensor>> AdamW::state_dict() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const std::string& name = index_.name(i);
    const Slot& slot = slots_[i];
    out.emplace_back(name + "/exp_avg", slot.m.detach().to(at::kCPU).clone());
    out.emplace_back(name + "/exp_avg_sq", slot.v.detach().to(at::kCPU).clone());
    if (options_.amsgrad) {
      out.emplace_back(name + "/max_exp_avg_sq", slot.v_max.detach().to(at::kCPU).clone());
    }
    out.emplace_back(name + "/step", slot.steps.clone());
  }
  return out;
}

void AdamW::load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::vector<SlotRef> targets;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const std::string& name = index_.name(i);
    Slot& slot = slots_[i];
    targets.push_back({name + "/exp_avg", &slot.m});
    targets.push_back({name + "/exp_avg_sq", &slot.v});
    if (options_.amsgrad) targets.push_back({name + "/max_exp_avg_sq", &slot.v_max});
    targets.push_back({name + "/step", &slot.steps});
  }
  load_slots(state, targets, "adamw");
}

int64_t AdamW::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : slots_)
    bytes += static_cast<int64_t>(s.m.nbytes() + s.v.nbytes() + s.steps.nbytes() +
                                  (s.v_max.defined() ? s.v_max.nbytes() : 0));
  return bytes;
}

}  // namespace bertlab::adamw
