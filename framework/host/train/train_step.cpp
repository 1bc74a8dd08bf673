// One training step on one rank, and the replicas' agreement check.

#include "train/train_step.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/log.h>
#include <bertlab/model/bert.h>
#include <bertlab/random.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace bertlab {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The factor of a token-weighted task's weighted_loss_sum in one replica's objective, so that
/// the strategies' mean over N replicas is Σ weighted losses / Σ weights of the whole step
/// ("global", hence N / global weight) or the mean of each replica's own mean ("per_replica").
/// 0 for other tasks or a step without any weight.
double token_weight_scale(const StepContext& ctx, const std::vector<Batch>& micro_batches) {
  if (!ctx.task->token_weighted_loss()) return 0.0;
  double weight = 0.0;
  for (const Batch& batch : micro_batches) weight += ctx.task->loss_weight(batch);
  if (!ctx.global_loss_normalization) return weight > 0 ? 1.0 / weight : 0.0;
  const int world = ctx.comm->world_size();
  if (world > 1) {
    std::vector<at::Tensor> w{at::tensor({weight}, at::kDouble)};
    ctx.comm->all_reduce_sum(w);
    weight = w[0].item<double>();
  }
  return weight > 0 ? static_cast<double>(world) / weight : 0.0;
}

/// The key of micro-batch m's per-example draws in `pass`: the seed, the step, the examples'
/// place in the step's global batch.
DropoutKey example_key(const StepContext& ctx, const Batch& batch, int64_t step, int64_t m,
                       int64_t pass) {
  const int64_t examples = batch.empty() ? ctx.split.shard() : batch.begin()->second.size(0);
  return DropoutKey{ctx.seed, step, ctx.split.offset(m), examples, pass};
}

/// One micro-batch's objective in forward pass `pass` (0 unless adversarial), with `delta` added
/// to the word embeddings' output when defined: the task's mean loss over the k micro-batches,
/// plus its token-weighted sum scaled by `weight_scale`.
at::Tensor objective_of(const StepContext& ctx, const Batch& batch, int64_t step, int64_t m,
                        double weight_scale, const at::Tensor& delta = {}, int64_t pass = 0) {
  // Per-example masks: keyed by the example's place in the step's global batch.
  std::optional<PerExampleDropoutScope> masks;
  if (ctx.per_example_dropout) masks.emplace(example_key(ctx, batch, step, m, pass));
  WordEmbeddingPerturbation perturbation(delta);
  // The forward pass only: backward runs outside autocast, as torch.autocast advises.
  AutocastScope autocast(ctx.autocast_dtype, ctx.device);
  LossOutput out = ctx.task->compute_loss(*ctx.model, batch);
  at::Tensor objective;
  if (out.loss.defined()) objective = out.loss / static_cast<double>(ctx.split.accumulation);
  if (out.weighted_loss_sum.defined()) {
    const at::Tensor weighted = out.weighted_loss_sum * weight_scale;
    objective = objective.defined() ? objective + weighted : weighted;
  }
  BERTLAB_CHECK(objective.defined(), "the task's compute_loss returned no loss");
  return objective;
}

/// Backward of an objective, multiplied by the loss scale when fp16 scales it.
void backward_objective(const StepContext& ctx, const at::Tensor& objective) {
  if (ctx.scaler->enabled()) {
    (objective.to(at::kFloat) * ctx.scaler->scale()).backward();
  } else {
    objective.backward();
  }
}

/// Micro-batch m's passes by the adversarial plugin; returns the objective it logs.
double adversarial_passes(const StepContext& ctx, const Batch& batch, int64_t step, int64_t m,
                          double weight_scale) {
  const auto mask = batch.find("input_mask");
  if (mask == batch.end()) {
    throw ConfigError(
        "[adversarial] the task's batches have no input_mask, which the perturbation's norms "
        "and random start need; use a task that has one (classifier, squad, pretrain)");
  }
  AdversarialBatch a;
  a.objective = [&](const at::Tensor& delta, int64_t pass) {
    return objective_of(ctx, batch, step, m, weight_scale, delta, pass);
  };
  a.backward = [&](const at::Tensor& objective) { backward_objective(ctx, objective); };
  a.input_mask = mask->second.to(at::kFloat);
  a.hidden_size = ctx.hidden_size;
  a.key = example_key(ctx, batch, step, m, 0);
  a.global_batch = ctx.split.batch_size;
  return ctx.adversarial->forward_backward(a);
}

/// Forward and backward of every micro-batch, the gradients adding up to the whole step's;
/// returns this rank's objective.
double forward_backward(const StepContext& ctx, const std::vector<Batch>& micro_batches,
                        int64_t step) {
  const double weight_scale = token_weight_scale(ctx, micro_batches);
  ctx.model->zero_grad(/*set_to_none=*/true);
  ctx.comm->reset_traffic();
  double local_loss = 0.0;
  for (size_t m = 0; m < micro_batches.size(); ++m) {
    const auto index = static_cast<int64_t>(m);
    if (ctx.adversarial != nullptr) {
      local_loss += adversarial_passes(ctx, micro_batches[m], step, index, weight_scale);
      continue;
    }
    const at::Tensor objective = objective_of(ctx, micro_batches[m], step, index, weight_scale);
    // Only the last backward completes the gradients (the earlier ones accumulate, as DDP's
    // no_sync): its hooks start the all-reduces.
    if (ctx.overlap != nullptr && m + 1 == micro_batches.size()) ctx.overlap->arm();
    backward_objective(ctx, objective);
    local_loss += objective.item<double>();
  }
  return local_loss;
}

/// The first parameter whose averaged gradient holds a NaN or an infinity, for the message of a
/// non-finite step ("?" when the norm alone overflowed).
std::string first_nonfinite_gradient(const GradientSet& grads) {
  for (const auto& e : grads.entries()) {
    const at::Tensor& t = e.is_sparse() ? e.values : e.dense;
    if (t.defined() && !at::isfinite(t).all().item<bool>()) return e.name;
  }
  return "? (every element is finite; their norm overflowed)";
}

/// Every rank holds the same loss and averaged gradients, so all decide alike: update, skip an
/// fp16 overflow (the scale backs off), or stop (or skip, as configured) on any other
/// non-finite loss or gradient.
void update_or_skip(const StepContext& ctx, GradientSet& grads, int64_t step, double step_scale,
                    StepResult& r) {
  // An optimizer given a non-finite gradient leaves the parameters alone and returns its norm.
  if (std::isfinite(r.loss)) {
    r.stats = ctx.optimizer->step(grads, step);
  } else {
    r.stats.learning_rate = ctx.optimizer->learning_rate(step);
    r.stats.grad_norm = std::numeric_limits<double>::quiet_NaN();
  }
  r.finite = std::isfinite(r.loss) && std::isfinite(r.stats.grad_norm);
  ctx.scaler->update(r.finite);
  if (r.finite) return;
  const bool leader = ctx.comm->rank() == 0;
  r.skipped = true;
  if (ctx.scaler->enabled()) {
    // An overflow of the scaled fp16 gradient is expected now and then: skip, back off.
    if (leader) {
      log_info("train",
               "step {}: the gradient overflowed at loss scale {}; update skipped, scale now {}",
               step + 1, step_scale, ctx.scaler->scale());
    }
    return;
  }
  const std::string what = std::isfinite(r.loss)
                               ? fmt::format("the gradient of {} is not finite (global norm {})",
                                             first_nonfinite_gradient(grads), r.stats.grad_norm)
                               : fmt::format("the loss is {}", r.loss);
  if (!ctx.skip_nonfinite) {
    throw Error(
        fmt::format("[train] step {}: {}; lower the learning rate or check the data, or set "
                    "train.on_nonfinite = \"skip_step\" to skip such steps",
                    step + 1, what));
  }
  r.skip_reason = what;
}

}  // namespace

StepResult train_step(const StepContext& ctx, const std::vector<Batch>& micro_batches,
                      int64_t step) {
  StepResult r;
  const auto t0 = Clock::now();
  ctx.strategy->begin_step(step);
  const double local_loss = forward_backward(ctx, micro_batches, step);
  GradientSet grads = GradientSet::from_module(*ctx.model);
  const auto t1 = Clock::now();
  // Communication time is what is left exposed after backward: the overlapped buckets' wait.
  if (ctx.overlap != nullptr) {
    r.overlap = ctx.overlap->finish();
    ctx.overlap->mark_averaged(grads);
  }
  if (ctx.probe != nullptr) ctx.probe->before_reduce(grads, *ctx.comm);
  ctx.strategy->reduce_gradients(grads, *ctx.comm);
  r.strategy_metrics = ctx.strategy->step_metrics();
  if (ctx.probe != nullptr) ctx.probe->after_reduce(grads, *ctx.strategy, *ctx.comm);
  // Scaled losses give scaled gradients; the optimizer (and its clipping) sees true ones.
  const double step_scale = ctx.scaler->scale();
  if (ctx.scaler->enabled()) grads.scale(1.0 / step_scale);
  const auto t2 = Clock::now();
  if (ctx.complete_gradients) {
    GradientSet whole = grads;
    ctx.strategy->complete_gradients(whole, *ctx.comm);
    if (ctx.on_averaged) ctx.on_averaged(step, whole);
  } else if (ctx.on_averaged) {
    ctx.on_averaged(step, grads);
  }
  // The global batch's loss: the replicas' objectives are scaled so that their mean is it.
  r.loss = local_loss;
  const int world = ctx.comm->world_size();
  if (world > 1) {
    std::vector<at::Tensor> l{at::tensor({r.loss}, at::kDouble)};
    ctx.comm->all_reduce_sum(l);
    r.loss = l[0].item<double>() / world;
  }
  update_or_skip(ctx, grads, step, step_scale, r);
  r.synced = ctx.strategy->after_update(ctx.parameters, *ctx.comm, step);
  // The step's payload: the gradients' exchange, and the parameters' (local SGD, zero1).
  r.dense_bytes = ctx.comm->traffic_bytes(Traffic::kDense);
  r.sparse_bytes = ctx.comm->traffic_bytes(Traffic::kSparse);
  if (ctx.probe != nullptr) {
    ctx.probe->after_update(r.synced, ctx.parameters, *ctx.optimizer, *ctx.comm);
    r.measures = ctx.probe->take();
  }
  const auto t3 = Clock::now();
  r.compute_s = seconds_between(t0, t1);
  r.comm_s = seconds_between(t1, t2);
  r.optimizer_s = seconds_between(t2, t3);
  return r;
}

void check_replicas_agree(torch::nn::Module& model, Communicator& comm, int64_t step) {
  std::vector<std::string> names;
  std::vector<double> sums;
  for (const auto& item : model.named_parameters(true)) {
    const at::Tensor p = item.value().detach().to(at::kDouble);
    names.push_back(item.key());
    sums.push_back(p.sum().item<double>());
    sums.push_back(p.pow(2).sum().item<double>());
  }
  const auto all = comm.all_gather(at::tensor(sums, at::kDouble));
  for (size_t r = 0; r < all.size(); ++r) {
    if (at::equal(all[r], all[0])) continue;
    const at::Tensor differs = all[r].ne(all[0]).nonzero();
    const int64_t first = differs[0][0].item<int64_t>() / 2;
    throw Error(fmt::format(
        "[train] step {}: the replicas diverged: parameter {} differs between rank 0 and rank {} "
        "(sum {:.17g} vs {:.17g}); a strategy left the ranks with different gradients",
        step, names[first], r, all[0][2 * first].item<double>(), all[r][2 * first].item<double>()));
  }
}

}  // namespace bertlab
