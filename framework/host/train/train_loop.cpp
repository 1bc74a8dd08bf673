// A rank's training loop, put together from its parts: batch source, step, agreement check, log,
// stop signal, checkpoints.

#include "train/train_loop.h"

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>
#include <bertlab/error.h>
#include <bertlab/log.h>
#include <bertlab/optimizer.h>
#include <bertlab/random.h>
#include <bertlab/strategy.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "train/batch_source.h"
#include "train/overlap_reducer.h"
#include "train/precision.h"
#include "train/process_group.h"
#include "train/rank_state.h"
#include "train/replica_group.h"
#include "train/stop_signal.h"
#include "train/train_log.h"
#include "train/train_step.h"

namespace bertlab {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// A rank's own strategy and optimizer (resumed with the run), and the overlap of all-reduce
/// with backward when the strategy asks for it.
struct RankComponents {
  std::unique_ptr<Strategy> strategy;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<OverlapReducer> overlap;
  LossScaler scaler;
  std::unique_ptr<ContractProbe> probe;  ///< gradcheck, for a strategy with a contract
  /// The replicas' parameters and optimizer state may differ (the strategy synchronises
  /// parameters, not gradients): every rank's go into the checkpoint.
  bool per_rank_weights = false;
  /// The strategy shards the optimizer (zero1): each rank's optimizer holds only the state of
  /// the parameters it updates; checkpoints gather the whole state to rank 0.
  bool sharded = false;
  /// Bytes of optimizer state on the rank that holds the most, and on all ranks together.
  int64_t state_bytes_max = 0, state_bytes_total = 0;
  std::unique_ptr<Adversarial> adversarial = nullptr;  ///< [adversarial], or null
};

/// The name of the parameter a "<parameter>/<slot>" optimizer state tensor belongs to.
std::string state_parameter(const std::string& state_name) {
  return state_name.substr(0, state_name.rfind('/'));
}

/// Rank 0: the whole optimizer state for a checkpoint, in the parameters' order (call on every
/// rank: a sharded optimizer's state is gathered from every rank).
NamedTensors whole_optimizer_state(const RankComponents& c,
                                   const std::vector<NamedTensor>& parameters, Communicator& comm) {
  if (!c.sharded) return comm.rank() == 0 ? c.optimizer->state_dict() : NamedTensors{};
  std::map<std::string, NamedTensors> by_parameter;
  for (const auto& rank : gather_rank_tensors(c.optimizer->state_dict(), comm)) {
    std::map<std::string, NamedTensors> mine;
    for (const auto& [name, t] : rank) mine[state_parameter(name)].emplace_back(name, t);
    // A parameter's state from the first rank that holds it (each holds its own shard).
    for (auto& [parameter, tensors] : mine) by_parameter.emplace(parameter, std::move(tensors));
  }
  NamedTensors out;
  for (const auto& p : parameters) {
    auto it = by_parameter.find(p.name);
    if (it == by_parameter.end()) continue;
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

/// The optimizer state's bytes per rank (the most on one rank, and the total), on every rank;
/// logged by rank 0 when the strategy shards it.
void measure_state_bytes(RankComponents& c, Communicator& comm) {
  const int64_t mine = c.optimizer->state_bytes();
  c.state_bytes_max = c.state_bytes_total = mine;
  if (comm.world_size() > 1) {
    c.state_bytes_max = c.state_bytes_total = 0;
    for (const auto& r : comm.all_gather(at::tensor({mine}, at::kLong))) {
      c.state_bytes_max = std::max(c.state_bytes_max, r.item<int64_t>());
      c.state_bytes_total += r.item<int64_t>();
    }
  }
  if (c.sharded && comm.rank() == 0) {
    log_info(
        "train",
        "optimizer state sharded over {} ranks: at most {:.1f} MiB on a rank, {:.1f} MiB in all",
        comm.world_size(), static_cast<double>(c.state_bytes_max) / (1 << 20),
        static_cast<double>(c.state_bytes_total) / (1 << 20));
  }
}

std::unique_ptr<RankComponents> make_components(const TrainLoop& loop, torch::nn::Module& model,
                                                Communicator& comm) {
  const ResolvedVariant& variant = *loop.variant;
  auto c = std::unique_ptr<RankComponents>(
      new RankComponents{variant.strategy.component->strategy_factory(variant.strategy.options),
                         variant.optimizer.component->optimizer_factory(variant.optimizer.options),
                         nullptr, LossScaler(loop.options->precision), nullptr});
  const ContractFn& contract = variant.strategy.component->spec.contract;
  if (contract) {
    const StrategyContract declared = contract(variant.strategy.options, comm.world_size());
    c->per_rank_weights = declared.claims(Invariant::kReplicasEqualAfterSync);
    if (loop.hooks->probe_contract) c->probe = std::make_unique<ContractProbe>(declared);
  }
  std::vector<NamedTensor> parameters;
  for (const auto& item : model.named_parameters(true)) {
    parameters.push_back({item.key(), item.value()});
  }
  // A sharding strategy (zero1): this rank's optimizer updates only its shard.
  const std::vector<bool> shard =
      c->strategy->optimizer_shard(parameters, comm.rank(), comm.world_size());
  std::vector<NamedTensor> updated;
  std::set<std::string> owned;
  if (!shard.empty()) {
    BERTLAB_CHECK(shard.size() == parameters.size(),
                  "strategy {}: optimizer_shard returned {} flags for {} parameters",
                  variant.strategy.plugin, shard.size(), parameters.size());
    c->sharded = true;
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (!shard[i]) continue;
      updated.push_back(parameters[i]);
      owned.insert(parameters[i].name);
    }
  }
  c->optimizer->init(c->sharded ? updated : parameters, OptimizerContext{loop.num_train_steps});
  if (variant.adversarial.component != nullptr) {
    c->adversarial =
        variant.adversarial.component->adversarial_factory(variant.adversarial.options);
  }
  // An adversarial step runs several backwards per micro-batch: its gradients are averaged
  // after the last one.
  if (comm.world_size() > 1 && c->strategy->overlap_bucket_mb() > 0 && c->adversarial &&
      comm.rank() == 0) {
    log_info("train",
             "[strategy] overlap_backward is not used with [adversarial] {}: the gradients are "
             "averaged after each step's last backward",
             variant.adversarial.plugin);
  }
  if (comm.world_size() > 1 && c->strategy->overlap_bucket_mb() > 0 && !c->adversarial) {
    c->overlap = std::make_unique<OverlapReducer>(model, comm, c->strategy->overlap_bucket_mb());
  }
  if (loop.resume != nullptr) {
    // The checkpoint holds the whole optimizer state; a shard takes its parameters' part.
    NamedTensors state;
    for (const auto& [name, t] : loop.resume->optimizer) {
      if (!c->sharded || owned.count(state_parameter(name))) state.emplace_back(name, t);
    }
    c->optimizer->load_state_dict(state);
    restore_rank_state(loop.resume->state.rank_state, comm.rank(), *c->strategy, *c->optimizer,
                       parameters);
    // fp16's dynamic loss scale; every rank's stays the same (they see the same averaged grads).
    if (c->scaler.enabled()) {
      c->scaler.restore(loop.resume->state.loss_scale,
                        loop.resume->state.loss_scale_growth_tracker);
    }
  }
  measure_state_bytes(*c, comm);
  return c;
}

StepContext step_context(const TrainLoop& loop, RankComponents& c, torch::nn::Module& model,
                         Communicator& comm) {
  const RunOptions& o = *loop.options;
  StepContext ctx;
  ctx.task = loop.task;
  ctx.model = &model;
  ctx.strategy = c.strategy.get();
  ctx.optimizer = c.optimizer.get();
  ctx.comm = &comm;
  ctx.overlap = c.overlap.get();
  ctx.adversarial = c.adversarial.get();
  ctx.hidden_size = loop.variant->bert_config.hidden_size;
  ctx.scaler = &c.scaler;
  ctx.split =
      BatchSplit{loop.batch_size, o.gradient_accumulation_steps, comm.world_size(), comm.rank()};
  ctx.device = loop.device;
  ctx.autocast_dtype = o.precision.autocast_dtype();
  ctx.seed = o.seed;
  ctx.per_example_dropout = o.per_example_dropout;
  ctx.global_loss_normalization = o.global_loss_normalization;
  ctx.skip_nonfinite = o.skip_nonfinite;
  for (const auto& item : model.named_parameters(true)) {
    ctx.parameters.push_back({item.key(), item.value()});
  }
  ctx.probe = c.probe.get();
  if (comm.rank() == 0 && loop.hooks->on_averaged) ctx.on_averaged = loop.hooks->on_averaged;
  ctx.complete_gradients = c.sharded && loop.hooks->on_averaged != nullptr;
  return ctx;
}

/// A resumable checkpoint after `done` steps (rank 0).
void save_checkpoint(const TrainLoop& loop, int64_t done, const TrainLog& log, double train_seconds,
                     const RankComponents& c, const BatchSource& source,
                     const torch::nn::Module& model, NamedTensors rank_state,
                     const NamedTensors& optimizer_state) {
  TrainState state;
  state.step = done;
  state.rank_state = std::move(rank_state);
  log.fill(state);
  state.train_seconds = train_seconds;
  state.loss_scale = c.scaler.scale();
  state.loss_scale_growth_tracker = c.scaler.growth_tracker();
  state.data_position = source.position();
  {
    // This rank's draws (dropout); every rank's generator is in the same state.
    at::Generator generator = replica_generator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    state.rng_state = generator.get_state();
  }
  save_train_checkpoint(loop.dir / "checkpoints", state, model, optimizer_state,
                        loop.variant->resolved_toml, loop.options->keep_checkpoint_max);
}

TrainLog::Setup log_setup(const TrainLoop& loop, const RankComponents& c, bool leader) {
  TrainLog::Setup s;
  s.dir = loop.dir;
  s.variant = loop.variant->name;
  s.num_train_steps = loop.num_train_steps;
  s.num_examples = loop.task->num_train_examples();
  s.batch_size = loop.batch_size;
  s.log_every = loop.options->log_every_steps;
  s.run_start = loop.start;
  s.leader = leader;
  s.write = leader && loop.write_files;
  s.overlap = c.overlap != nullptr;
  s.optimizer_state_bytes = c.state_bytes_max;
  return s;
}

/// An evaluation during training ([train] eval_every_steps) after step `step`: rank 0 evaluates
/// (every rank holds the same parameters) into `metrics`, and every rank learns whether
/// [train] stop_when is met. The task's evaluation draws no random numbers: the training goes on
/// as without it.
bool evaluate_during_training(const TrainLoop& loop, torch::nn::Module& model, Communicator& comm,
                              int64_t step, Metrics* metrics) {
  const RunOptions& o = *loop.options;
  double flag = 0.0;  // 1: stop_when met; 2: its metric is not the task's
  std::string names;
  if (comm.rank() == 0) {
    model.eval();
    {
      AutocastScope autocast(o.precision.autocast_dtype(), loop.device);
      *metrics = loop.task->evaluate(model, EvalContext{loop.device, o.eval_batch_size, {}});
    }
    model.train();
    if (o.stop_when) {
      flag = 2.0;
      for (const auto& [name, value] : *metrics) {
        names += (names.empty() ? "" : ", ") + name;
        if (name == o.stop_when->metric) flag = o.stop_when->met(value) ? 1.0 : 0.0;
      }
    }
  }
  if (comm.world_size() > 1) {
    std::vector<at::Tensor> flags{at::tensor({flag}, at::kDouble)};
    comm.all_reduce_sum(flags);
    flag = flags[0].item<double>();
  }
  BERTLAB_CHECK_AS(ConfigError, flag < 2.0,
                   "[train] stop_when = \"{}\": the task reports no metric '{}' (it reports: {}); "
                   "name one of them",
                   o.stop_when->text(), o.stop_when->metric, names.empty() ? "see rank 0" : names);
  if (flag != 0.0 && comm.rank() == 0) {
    log_info("train", "variant '{}': stop_when {} met after step {} of {}: training ends",
             loop.variant->name, o.stop_when->text(), step + 1, loop.num_train_steps);
  }
  return flag != 0.0;
}

/// After step `step`: a checkpoint when one is due or a signal stops the run, and the stop
/// (Interrupted) every rank takes after the same step.
void checkpoint_or_stop(
    const TrainLoop& loop, const RankComponents& c, const StepContext& ctx, Communicator& comm,
    int64_t step, TrainLog& log,
    const std::function<void(int64_t, NamedTensors, const NamedTensors&)>& checkpoint) {
  const int rank = comm.rank();
  const bool write = rank == 0 && loop.write_files;
  const int64_t save_every = loop.checkpoints ? loop.options->save_checkpoints_steps : 0;
  // A signal stops every rank after the same step (rank 0 then writes a checkpoint).
  const bool stopping = ranks_agree_to_stop(comm) && step + 1 < loop.stop_after;
  const int signal = stop_signal_received() != 0 ? stop_signal_received() : SIGTERM;
  const bool due = save_every > 0 && (step + 1) % save_every == 0;
  // Every rank contributes its own state to rank 0's checkpoint.
  NamedTensors rank_state, optimizer_state;
  if (loop.checkpoints && (due || stopping)) {
    rank_state =
        gather_rank_state(*c.strategy, *c.optimizer, ctx.parameters, c.per_rank_weights, comm);
    optimizer_state = whole_optimizer_state(c, ctx.parameters, comm);
  }
  if (stopping && !write) {
    throw Interrupted(fmt::format("bertlab: {}: rank {} stopped after step {}", signal_name(signal),
                                  rank, step + 1),
                      signal);
  }
  if (!write) return;
  if (due || stopping) checkpoint(step + 1, std::move(rank_state), optimizer_state);
  const std::string where = train_checkpoint_dir(loop.dir / "checkpoints", step + 1).string();
  if (due) log_info("train", "step {}: checkpoint {}", step + 1, where);
  if (stopping) {
    log.abandon();  // metrics.jsonl.partial stays: the steps done so far
    throw Interrupted(
        fmt::format("bertlab: {} during variant '{}': stopped after step {} of {}; checkpoint "
                    "{}; run the same command with --resume to continue",
                    signal_name(signal), loop.variant->name, step + 1, loop.num_train_steps, where),
        signal);
  }
}

/// One rank's training loop (docs/architecture.md, "One training step"). Rank 0 also logs and
/// writes metrics.jsonl and checkpoints. Every rank holds identical parameters after each step.
TrainOutcome train_rank(const TrainLoop& loop, torch::nn::Module& model, Communicator& comm) {
  const int rank = comm.rank();
  const bool write = rank == 0 && loop.write_files;
  const auto c = make_components(loop, model, comm);
  const TrainState* resumed = loop.resume != nullptr ? &loop.resume->state : nullptr;
  const int64_t first_step = resumed != nullptr ? resumed->step : 0;
  const StepContext ctx = step_context(loop, *c, model, comm);
  const auto source = make_batch_source(*loop.task, ctx.split, loop.options->seed, first_step,
                                        resumed != nullptr ? resumed->data_position : "");
  TrainLog log(log_setup(loop, *c, rank == 0), resumed, first_step);
  const double earlier_seconds = resumed != nullptr ? resumed->train_seconds : 0.0;
  const int64_t check_every = loop.options->check_every_steps;
  const int64_t eval_every = loop.options->eval_every_steps;
  auto checkpoint = [&](int64_t done, NamedTensors rank_state, const NamedTensors& optimizer) {
    save_checkpoint(loop, done, log, earlier_seconds + log.seconds(), *c, *source, model,
                    std::move(rank_state), optimizer);
  };
  TrainOutcome outcome;
  outcome.steps = first_step;
  if (rank == 0 && loop.hooks->on_initial_parameters) {
    loop.hooks->on_initial_parameters(ctx.parameters);
  }
  model.train();
  for (int64_t step = first_step; step < loop.stop_after; ++step) {
    const auto t_data = Clock::now();
    const std::vector<Batch> micro_batches = source->next_step(loop.device);
    const double data_s = seconds_since(t_data);
    const StepResult r = train_step(ctx, micro_batches, step);
    if (rank == 0 && c->probe && loop.hooks->on_contract) {
      loop.hooks->on_contract(step, r.measures);
    }
    if (rank == 0 && loop.hooks->on_parameters) loop.hooks->on_parameters(step, ctx.parameters);
    // Between a local-SGD strategy's synchronisations the replicas differ by design.
    if (comm.world_size() > 1 && r.synced &&
        ((step + 1) % check_every == 0 || step + 1 == loop.stop_after)) {
      check_replicas_agree(model, comm, step + 1);
    }
    outcome.steps = step + 1;
    log.record(step, r, data_s);
    if (rank == 0 && loop.hooks->on_loss) loop.hooks->on_loss(step, r.loss);
    Metrics eval_metrics;
    const bool target_met = eval_every > 0 && (step + 1) % eval_every == 0 &&
                            step + 1 < loop.stop_after &&
                            evaluate_during_training(loop, model, comm, step, &eval_metrics);
    if (write) log.write_step(step, r, c->scaler.enabled() ? c->scaler.scale() : 0.0, target_met);
    if (write && !eval_metrics.empty()) log.write_eval(step, eval_metrics);
    if (target_met) break;
    checkpoint_or_stop(loop, *c, ctx, comm, step, log, checkpoint);
  }
  outcome.train_seconds = earlier_seconds + log.seconds();
  outcome.final_loss = log.final_loss();
  if (write) log.finish();
  return outcome;
}

}  // namespace

TrainOutcome train_replicas(const TrainLoop& loop,
                            const std::vector<std::shared_ptr<torch::nn::Module>>& models) {
  const int world = static_cast<int>(models.size());
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(loop.options->timeout_s * 1000.0));
  TrainOutcome outcome;
  run_thread_ranks(world, timeout, loop.device, [&](int rank, Communicator& comm) {
    TrainOutcome mine = train_rank(loop, *models[static_cast<size_t>(rank)], comm);
    if (rank == 0) outcome = mine;
  });
  return outcome;
}

TrainOutcome train_process_rank(const TrainLoop& loop, torch::nn::Module& model,
                                const ProcessRank& process, const std::string& group_name) {
  auto comm = join_process_group(process, *loop.options, loop.device, loop.variant->resolved_toml,
                                 group_name);
  return train_rank(loop, model, *comm);
}

}  // namespace bertlab
