#include "sgd.h"

#include <bertlab/error.h>
#include <bertlab/log.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>

namespace bertlab::sgd {

SgdOptions::SgdOptions() {
  schedule.learning_rate = 0.01;
  schedule.warmup_proportion = 0.0;
  schedule.decay = DecayKind::kConstant;
  clip.clip_norm = 0.0;
}

std::vector<OptionDecl> SgdOptions::declarations() {
  const SgdOptions d;
  std::vector<OptionDecl> decls = ScheduleOptions::declarations(
      d.schedule.learning_rate, d.schedule.warmup_proportion, to_string(d.schedule.decay));
  decls.push_back(
      float_option("momentum", d.momentum, "momentum factor; 0: plain SGD").in_range(0, 1));
  decls.push_back(float_option("dampening", d.dampening,
                               "the gradient enters the momentum buffer scaled by 1 - dampening")
                      .in_range(0, 1));
  decls.push_back(bool_option("nesterov", d.nesterov,
                              "Nesterov momentum (needs momentum > 0 and dampening 0)"));
  decls.push_back(float_option("weight_decay_rate", d.weight_decay_rate,
                               "L2 penalty added to the gradient, as torch.optim.SGD")
                      .at_least(0));
  for (auto& decl : ClipOptions::declarations(d.clip.clip_norm)) decls.push_back(std::move(decl));
  decls.push_back(WeightDecayExclusion::declaration("LayerNorm,layer_norm,bias"));
  return decls;
}

SgdOptions SgdOptions::from_config(const ConfigView& view) {
  SgdOptions o;
  o.schedule = ScheduleOptions::from_config(view);
  o.momentum = view.get_float("momentum");
  o.dampening = view.get_float("dampening");
  o.nesterov = view.get_bool("nesterov");
  o.weight_decay_rate = view.get_float("weight_decay_rate");
  o.clip = ClipOptions::from_config(view);
  o.exclusion = WeightDecayExclusion::from_config(view);
  o.validate();
  return o;
}

void SgdOptions::validate() const {
  auto fail = [](const std::string& message) { throw ConfigError("[optimizer] " + message); };
  schedule.validate();
  if (!(momentum >= 0 && momentum <= 1))
    fail(fmt::format("momentum must be in [0, 1], got {}", momentum));
  if (!(dampening >= 0 && dampening <= 1)) {
    fail(fmt::format("dampening must be in [0, 1], got {}", dampening));
  }
  if (!(weight_decay_rate >= 0)) {
    fail(fmt::format("weight_decay_rate must be >= 0, got {}", weight_decay_rate));
  }
  if (nesterov && (momentum <= 0 || dampening != 0)) {
    fail(
        fmt::format("nesterov = true needs momentum > 0 and dampening = 0 (as torch.optim.SGD), "
                    "got momentum {} and dampening {}",
                    momentum, dampening));
  }
}

Sgd::Sgd(SgdOptions options) : options_(std::move(options)) { options_.validate(); }

void Sgd::init(const std::vector<NamedTensor>& parameters, const OptimizerContext& ctx) {
  schedule_ = Schedule(options_.schedule, ctx.num_train_steps);
  index_.reset(parameters, "sgd");
  slots_.clear();
  c10::NoGradGuard no_grad;
  for (const auto& p : parameters) {
    Slot slot;
    slot.param = p.tensor;
    if (options_.momentum > 0) {
      slot.buffer = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
      slot.steps = at::zeros({}, at::kLong);
    }
    slot.decay = options_.exclusion.decays(p.name, options_.weight_decay_rate);
    slots_.push_back(std::move(slot));
  }
  log_info("train", "sgd: {} parameters, momentum {}{}, {} steps, {}", slots_.size(),
           options_.momentum, options_.nesterov ? " (nesterov)" : "", schedule_.num_train_steps(),
           schedule_.describe());
}

StepStats Sgd::step(GradientSet& grads, int64_t step) {
  BERTLAB_CHECK(schedule_.num_train_steps() > 0, "sgd: step() before init()");
  StepStats stats;
  const double lr = schedule_.at(step);
  stats.learning_rate = lr;
  stats.grad_norm = options_.clip.apply(grads);
  // A non-finite gradient: no update; the host reports it ([train] on_nonfinite).
  if (!std::isfinite(stats.grad_norm)) return stats;
  const SgdOptions& o = options_;
  c10::NoGradGuard no_grad;
  for (const auto& entry : grads.entries()) {
    Slot& slot = slots_[index_.at(entry)];
    at::Tensor d_p = entry.is_sparse() ? entry.to_dense() : entry.dense;
    if (slot.decay) d_p = d_p.add(slot.param, o.weight_decay_rate);
    if (o.momentum > 0) {
      // As torch.optim.SGD: the first update sets the buffer to the gradient itself.
      const int64_t t = slot.steps.item<int64_t>();
      if (t == 0) {
        slot.buffer.copy_(d_p);
      } else {
        slot.buffer.mul_(o.momentum).add_(d_p, 1.0 - o.dampening);
      }
      slot.steps.fill_(t + 1);
      d_p = o.nesterov ? d_p.add(slot.buffer, o.momentum) : slot.buffer;
    }
    slot.param.add_(d_p, -lr);
  }
  return stats;
}

std::vector<std::pair<std::string, at::Tensor>> Sgd::state_dict() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  if (options_.momentum <= 0) return out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    out.emplace_back(index_.name(i) + "/momentum_buffer",
                     slots_[i].buffer.detach().to(at::kCPU).clone());
    out.emplace_back(index_.name(i) + "/step", slots_[i].steps.clone());
  }
  return out;
}

void Sgd::load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::vector<SlotRef> targets;
  if (options_.momentum > 0) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      targets.push_back({index_.name(i) + "/momentum_buffer", &slots_[i].buffer});
      targets.push_back({index_.name(i) + "/step", &slots_[i].steps});
    }
  }
  load_slots(state, targets, "sgd");
}

int64_t Sgd::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : slots_)
    bytes += s.buffer.defined() ? static_cast<int64_t>(s.buffer.nbytes() + s.steps.nbytes()) : 0;
  return bytes;
}

}  // namespace bertlab::sgd
