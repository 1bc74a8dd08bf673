// `bertlab bench step`: a BERT training step timed by phase.

#include "commands/bench_step.h"

#include <ATen/ATen.h>
#include <bertlab/adversarial.h>
#include <bertlab/communicator.h>
#include <bertlab/config.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/model/bert.h>
#include <bertlab/optimizer.h>
#include <bertlab/random.h>
#include <bertlab/strategy.h>
#include <bertlab/task.h>
#include <sys/resource.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "runtime/plugin_host.h"
#include "runtime/threads.h"
#include "train/overlap_reducer.h"
#include "train/precision.h"
#include "train/replica_group.h"

namespace bertlab {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

const Component& component(const PluginHost& host, ComponentKind kind, const std::string& name) {
  const Component* c = host.registry().find(kind, name);
  if (c == nullptr) {
    throw ConfigError(fmt::format("bench step: no {} named '{}'; `bertlab plugins` lists them",
                                  to_string(kind), name));
  }
  return *c;
}

// The FLOPs of one training step of the encoder (forward + backward ≈ 3 × forward): per token
// and layer the four H×H projections and the two H×I ones (2 FLOPs per multiply-add), and the
// attention products QKᵀ and AV over the sequence.
double encoder_flops(const StepBenchOptions& o) {
  const auto h = static_cast<double>(o.hidden_size);
  const auto i = static_cast<double>(o.intermediate_size);
  const auto s = static_cast<double>(o.seq);
  const double per_token_layer = 2.0 * (4.0 * h * h + 2.0 * h * i) + 4.0 * s * h;
  return 3.0 * per_token_layer * static_cast<double>(o.num_hidden_layers) *
         static_cast<double>(o.batch) * s;
}

// The masked-LM slots of a pretraining batch, and how many of them hold a masked token.
struct MaskedLmShape {
  int64_t slots = 0;   // the task's max_predictions_per_seq
  int64_t masked = 0;  // per sequence, weight 1; the slots after them are padding, weight 0
};

// Random token ids, a full mask and two segments: what every task reads.
Batch encoder_batch(const StepBenchOptions& o, int64_t rows, at::Generator& gen) {
  Batch b;
  b["input_ids"] = at::randint(o.vocab_size, {rows, o.seq}, gen, at::kLong);
  b["input_mask"] = at::ones({rows, o.seq}, at::kLong);
  at::Tensor segments = at::zeros({rows, o.seq}, at::kLong);
  segments.narrow(1, o.seq / 2, o.seq - o.seq / 2).fill_(1);
  b["segment_ids"] = segments;
  return b;
}

// The pretrain task's masked-LM and next-sentence keys, laid out as create_pretraining_data.py
// writes them: `masked` distinct random positions in ascending order with random original ids
// and weight 1, padding slots at position 0 with id 0 and weight 0, and random is-random-next
// labels.
void add_pretrain_keys(Batch& b, const StepBenchOptions& o, const MaskedLmShape& lm, int64_t rows,
                       at::Generator& gen) {
  // The first `masked` of a random permutation of each row's positions, ascending.
  const at::Tensor permutation = at::argsort(at::rand({rows, o.seq}, gen), /*stable=*/false,
                                             /*dim=*/1);
  const at::Tensor drawn = std::get<0>(at::sort(permutation.narrow(1, 0, lm.masked), /*dim=*/1));
  at::Tensor positions = at::zeros({rows, lm.slots}, at::kLong);
  positions.narrow(1, 0, lm.masked).copy_(drawn);
  at::Tensor ids = at::zeros({rows, lm.slots}, at::kLong);
  ids.narrow(1, 0, lm.masked).copy_(at::randint(o.vocab_size, {rows, lm.masked}, gen, at::kLong));
  at::Tensor weights = at::zeros({rows, lm.slots}, at::kFloat);
  weights.narrow(1, 0, lm.masked).fill_(1.0);
  b["masked_lm_positions"] = positions;
  b["masked_lm_ids"] = ids;
  b["masked_lm_weights"] = weights;
  b["next_sentence_labels"] = at::randint(2, {rows}, gen, at::kLong);
}

// One replica's batch of --task: the encoder's inputs and random answer spans (squad) or
// masked-LM slots and next-sentence labels (pretrain).
Batch make_batch(const StepBenchOptions& o, const MaskedLmShape& lm, int64_t rows, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  Batch b = encoder_batch(o, rows, gen);
  if (o.task == "pretrain") {
    add_pretrain_keys(b, o, lm, rows, gen);
  } else {
    b["start_positions"] = at::randint(o.seq, {rows}, gen, at::kLong);
    b["end_positions"] = at::randint(o.seq, {rows}, gen, at::kLong);
  }
  return b;
}

struct Phases {
  std::vector<double> step, forward, backward, comm, optimizer;
  int64_t dense_bytes = 0;  // sent by rank 0 in the last step
  int64_t sparse_bytes = 0;
  OverlapStats overlap;               // rank 0's last step
  int64_t optimizer_state_bytes = 0;  // the most one rank holds
};

// Throws ConfigError("bench step: <message>") unless `ok`.
void check(bool ok, const std::string& message) {
  if (!ok) throw ConfigError("bench step: " + message);
}

// Checks the task, step, replica, thread, strategy and precision flags.
void check_options(const StepBenchOptions& o) {
  check(o.task == "squad" || o.task == "pretrain",
        fmt::format("--task must be squad or pretrain, got {}", o.task));
  check(o.dropout >= 0 && o.dropout < 1,
        fmt::format("--dropout must be in [0, 1), got {}", o.dropout));
  check(o.steps >= 1, fmt::format("--steps must be >= 1, got {}", o.steps));
  check(o.replicas >= 1, fmt::format("--replicas must be >= 1, got {}", o.replicas));
  check(o.batch % o.replicas == 0,
        fmt::format("--batch {} does not split over {} replicas", o.batch, o.replicas));
  check(o.threads >= 1, fmt::format("--threads must be >= 1, got {}", o.threads));
  check(o.strategy != "single" || o.replicas == 1, "the single strategy runs one replica");
  check(o.precision == "fp32" || o.precision == "bf16" || o.precision == "fp16",
        fmt::format("--precision must be fp32, bf16 or fp16, got {}", o.precision));
}

// The device --device names (cuda as cuda:0), checked against this build and --precision.
c10::Device bench_device(const StepBenchOptions& o) {
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(o.device);
  } catch (const c10::Error&) {
    check(false, fmt::format("--device: '{}' is not a device; use cpu or cuda:N", o.device));
  }
  check(!device.is_cuda() || at::hasCUDA(),
        fmt::format("--device {} needs a bertlab built against a CUDA libtorch", o.device));
  check(o.precision != "fp16" || device.is_cuda(), "--precision fp16 needs --device cuda");
  if (device.is_cuda() && !device.has_index()) device.set_index(0);
  return device;
}

// BERT's configuration from the size and dropout flags, validated.
BertConfig bert_config(const StepBenchOptions& o) {
  BertConfig config;
  config.hidden_size = o.hidden_size;
  config.num_hidden_layers = o.num_hidden_layers;
  config.num_attention_heads = o.num_attention_heads;
  config.intermediate_size = o.intermediate_size;
  config.vocab_size = o.vocab_size;
  config.max_position_embeddings = std::max<int64_t>(512, o.seq);
  config.hidden_dropout_prob = o.dropout;
  config.attention_probs_dropout_prob = o.dropout;
  config.validate();
  return config;
}

// Whether the component (a strategy, a task) declares the option `key`.
bool declares(const Component& c, const std::string& key) {
  return std::any_of(c.spec.options.begin(), c.spec.options.end(),
                     [&](const OptionDecl& d) { return d.key == key; });
}

// As create_pretraining_data.py's create_masked_lm_predictions for a sequence of --seq tokens:
// round(seq · 0.15) masked tokens, at least 1 and at most the task's max_predictions_per_seq
// slots (its default 20: 19 masked tokens and 1 padding slot at seq 128). Empty for squad.
MaskedLmShape masked_lm_shape(const StepBenchOptions& o, const Component& task,
                              const ConfigView& task_view) {
  if (o.task != "pretrain") return {};
  MaskedLmShape lm;
  lm.slots = declares(task, "max_predictions_per_seq")
                 ? task_view.get_int("max_predictions_per_seq")
                 : 20;  // create_pretraining_data.py's default
  const auto rounded = static_cast<int64_t>(std::nearbyint(static_cast<double>(o.seq) * 0.15));
  lm.masked = std::min(lm.slots, std::max<int64_t>(1, rounded));
  return lm;
}

// The strategy options the flags set; the others keep the strategy's defaults.
std::map<std::string, OptionValue> strategy_values(const StepBenchOptions& o,
                                                   const Component& strategy) {
  std::map<std::string, OptionValue> values;
  if (o.overlap_backward) {
    check(declares(strategy, "overlap_backward"),
          fmt::format("--overlap-backward: the {} strategy has no overlap_backward option; use "
                      "mirrored or sparse_allgather",
                      o.strategy));
    values["overlap_backward"] = true;
  }
  if (o.bucket_mb > 0) {
    check(declares(strategy, "bucket_mb"),
          fmt::format("--bucket-mb: the {} strategy has no bucket_mb option", o.strategy));
    values["bucket_mb"] = o.bucket_mb;
  }
  if (!o.compression.empty()) {
    check(declares(strategy, "compression"),
          fmt::format("--compression: the {} strategy has no compression option; use mirrored",
                      o.strategy));
    values["compression"] = o.compression;
  }
  for (auto& [key, value] : strategy_option_values(o.strategy_options, strategy, "bench step")) {
    values[key] = value;
  }
  return values;
}

// One model per replica, each initialized from the same seed, on `device`.
std::vector<std::shared_ptr<torch::nn::Module>> create_models(Task& task, const BertConfig& config,
                                                              const StepBenchOptions& o,
                                                              c10::Device device) {
  std::vector<std::shared_ptr<torch::nn::Module>> models;
  for (int r = 0; r < o.replicas; ++r) {
    at::manual_seed(12345);
    models.push_back(task.create_model(config, o.sparse_embeddings));
    models.back()->to(device);
  }
  return models;
}

// What every rank reads: the flags, the device, the components and the models.
struct BenchContext {
  const StepBenchOptions& o;
  c10::Device device;
  PrecisionOptions precision;
  Task& task;
  const Component& strategy;
  const Component& optimizer;
  const ConfigView& strategy_view;
  const Component* adversarial;  // null: plain training
  const ConfigView& adversarial_view;
  std::vector<std::shared_ptr<torch::nn::Module>> models;  // [rank]
  int64_t rows;                                            // of the batch, per replica
  MaskedLmShape masked_lm;                                 // pretrain's slots
};

// One rank's model, strategy, optimizer and batch, ready to step.
struct RankState {
  torch::nn::Module* model = nullptr;
  std::unique_ptr<Strategy> strategy;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<OverlapReducer> overlap;   // when the strategy overlaps backward
  std::unique_ptr<Adversarial> adversarial;  // --adversarial
  Batch batch;
  double weight_scale = 0.0;            // of a token-weighted task's weighted_loss_sum
  at::Tensor probe;                     // a parameter, read to wait for the device
  std::vector<NamedTensor> parameters;  // the model's, for Strategy::after_update
};

// The clock at the phase boundaries of one step, and the overlap reducer's counts.
struct StepTimes {
  Clock::time_point start, forward_end, backward_end, comm_end, end;
  OverlapStats overlap;
};

// The factor of a token-weighted task's weighted_loss_sum in the objective, as training's
// token_weight_scale with loss_normalization = "global" (its default): replicas / the weight of
// the whole step's batch, summed over the replicas. 0 for other tasks. The batch is the same in
// every step, so it is computed once, outside the timed steps.
double token_weight_scale(const BenchContext& ctx, const Batch& batch, Communicator& comm) {
  if (!ctx.task.token_weighted_loss()) return 0.0;
  std::vector<at::Tensor> weight{at::tensor({ctx.task.loss_weight(batch)}, at::kDouble)};
  if (comm.world_size() > 1) comm.all_reduce_sum(weight);
  const double total = weight[0].item<double>();
  return total > 0 ? static_cast<double>(comm.world_size()) / total : 0.0;
}

// Builds rank `rank`'s strategy, optimizer, overlap reducer and batch.
RankState make_rank(const BenchContext& ctx, int rank, Communicator& comm) {
  RankState s;
  s.model = ctx.models[static_cast<size_t>(rank)].get();
  s.strategy = ctx.strategy.strategy_factory(ctx.strategy_view);
  s.optimizer =
      ctx.optimizer.optimizer_factory(ConfigView("optimizer", ctx.optimizer.spec.options, {}));
  std::vector<NamedTensor> parameters;
  for (const auto& item : s.model->named_parameters(true)) {
    parameters.push_back({item.key(), item.value()});
  }
  // A sharding strategy (zero1): this rank's optimizer holds its shard only, as in training.
  const std::vector<bool> shard = s.strategy->optimizer_shard(parameters, rank, ctx.o.replicas);
  std::vector<NamedTensor> updated;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (shard.empty() || shard[i]) updated.push_back(parameters[i]);
  }
  s.optimizer->init(updated, OptimizerContext{ctx.o.steps + 1});
  s.parameters = parameters;
  if (ctx.adversarial != nullptr) {
    s.adversarial = ctx.adversarial->adversarial_factory(ctx.adversarial_view);
  }
  if (ctx.o.replicas > 1 && s.strategy->overlap_bucket_mb() > 0 && !s.adversarial) {
    s.overlap = std::make_unique<OverlapReducer>(*s.model, comm, s.strategy->overlap_bucket_mb());
  }
  s.batch = make_batch(ctx.o, ctx.masked_lm, ctx.rows, 1000 + static_cast<uint64_t>(rank));
  for (auto& [name, t] : s.batch) t = t.to(ctx.device);
  s.weight_scale = token_weight_scale(ctx, s.batch, comm);
  s.probe = parameters.front().tensor;
  return s;
}

// Waits for the device (a no-op on CPU), so each phase is its own time.
void sync(const BenchContext& ctx, const at::Tensor& probe) {
  if (ctx.device.is_cuda()) (void)probe.flatten()[0].item<float>();
}

// The forward pass and the objective training backpropagates (train_step.cpp's objective_of,
// one micro-batch): the task's mean loss plus its token-weighted sum times the rank's scale;
// under autocast, with per-example dropout masks when asked and `delta` added to the word
// embeddings' output in an adversarial pass.
at::Tensor forward_objective(const BenchContext& ctx, RankState& s, int rank, int step,
                             const at::Tensor& delta = {}, int64_t pass = 0) {
  AutocastScope autocast(ctx.precision.autocast_dtype(), ctx.device);
  std::optional<PerExampleDropoutScope> masks;
  if (ctx.o.dropout_rng == "per_example") {
    masks.emplace(DropoutKey{12345, step, rank * ctx.rows, ctx.rows, pass});
  }
  WordEmbeddingPerturbation perturbation(delta);
  const LossOutput out = ctx.task.compute_loss(*s.model, s.batch);
  at::Tensor objective = out.loss;
  if (out.weighted_loss_sum.defined()) {
    const at::Tensor weighted = out.weighted_loss_sum * s.weight_scale;
    objective = objective.defined() ? objective + weighted : weighted;
  }
  BERTLAB_CHECK(objective.defined(), "the {} task's compute_loss returned no loss", ctx.o.task);
  return objective;
}

// An adversarial step's passes, as training runs them (forward and backward both).
void adversarial_passes(const BenchContext& ctx, RankState& s, int rank, int step) {
  AdversarialBatch a;
  a.objective = [&](const at::Tensor& delta, int64_t pass) {
    return forward_objective(ctx, s, rank, step, delta, pass);
  };
  a.backward = [](const at::Tensor& objective) { objective.backward(); };
  a.input_mask = s.batch.at("input_mask").to(at::kFloat);
  a.hidden_size = ctx.o.hidden_size;
  a.key = DropoutKey{12345, step, rank * ctx.rows, ctx.rows};
  a.global_batch = ctx.o.batch;
  s.adversarial->forward_backward(a);
}

// One training step of one rank (forward, backward, gradient reduction, update), timed.
StepTimes timed_step(const BenchContext& ctx, RankState& s, int rank, int step,
                     Communicator& comm) {
  StepTimes t;
  sync(ctx, s.probe);
  t.start = Clock::now();
  s.model->zero_grad(/*set_to_none=*/true);
  comm.reset_traffic();
  s.strategy->begin_step(step);
  if (s.adversarial) {
    // Forwards and backwards interleave: the forward phase is empty, backward holds them all.
    t.forward_end = Clock::now();
    adversarial_passes(ctx, s, rank, step);
  } else {
    const at::Tensor objective = forward_objective(ctx, s, rank, step);
    sync(ctx, s.probe);
    t.forward_end = Clock::now();
    if (s.overlap) s.overlap->arm();
    objective.backward();
  }
  GradientSet grads = GradientSet::from_module(*s.model);
  sync(ctx, s.probe);
  t.backward_end = Clock::now();
  // The communication phase is what backward left to wait for.
  if (s.overlap) {
    t.overlap = s.overlap->finish();
    s.overlap->mark_averaged(grads);
  }
  s.strategy->reduce_gradients(grads, comm);
  sync(ctx, s.probe);
  t.comm_end = Clock::now();
  s.optimizer->step(grads, step);
  // Parameters synchronised after the update (local SGD's averaging, zero1's all-gather).
  s.strategy->after_update(s.parameters, comm, step);
  sync(ctx, s.probe);
  t.end = Clock::now();
  return t;
}

// Adds one timed step's phase times and traffic to rank 0's record.
void record(Phases& phases, const StepTimes& t, const Communicator& comm) {
  phases.step.push_back(seconds(t.start, t.end));
  phases.forward.push_back(seconds(t.start, t.forward_end));
  phases.backward.push_back(seconds(t.forward_end, t.backward_end));
  phases.comm.push_back(seconds(t.backward_end, t.comm_end));
  phases.optimizer.push_back(seconds(t.comm_end, t.end));
  phases.dense_bytes = comm.traffic_bytes(Traffic::kDense);
  phases.sparse_bytes = comm.traffic_bytes(Traffic::kSparse);
  phases.overlap = t.overlap;
}

// One rank's run: a warm-up step, then --steps timed ones; rank 0 records its phases.
void run_rank(const BenchContext& ctx, int rank, Communicator& comm, Phases& phases) {
  RankState s = make_rank(ctx, rank, comm);
  int64_t most = s.optimizer->state_bytes();
  if (comm.world_size() > 1) {
    for (const auto& r : comm.all_gather(at::tensor({most}, at::kLong))) {
      most = std::max(most, r.item<int64_t>());
    }
  }
  if (rank == 0) phases.optimizer_state_bytes = most;
  s.model->train();
  for (int step = 0; step <= ctx.o.steps; ++step) {  // step 0 warms up
    const StepTimes t = timed_step(ctx, s, rank, step, comm);
    if (rank == 0 && step > 0) record(phases, t, comm);
  }
}

// The JSON line: the flags, the median step time, throughput, peak memory, the phases' shares
// and the FLOP rate.
nlohmann::ordered_json report(const BenchContext& ctx, const Phases& phases) {
  const StepBenchOptions& o = ctx.o;
  const double step_s = median(phases.step);
  const double total =
      phases.step.empty()
          ? 1.0
          : std::max(1e-12, std::accumulate(phases.step.begin(), phases.step.end(), 0.0));
  auto share = [&](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / total;
  };
  const double flops = encoder_flops(o);
  nlohmann::ordered_json j;
  j["impl"] = "bertlab";
  j["task"] = o.task;
  j["hidden_size"] = o.hidden_size;
  j["num_hidden_layers"] = o.num_hidden_layers;
  j["num_attention_heads"] = o.num_attention_heads;
  j["intermediate_size"] = o.intermediate_size;
  j["vocab_size"] = o.vocab_size;
  j["batch"] = o.batch;
  j["seq"] = o.seq;
  if (o.task == "pretrain") {
    j["masked_lm_slots"] = ctx.masked_lm.slots;
    j["masked_lm_tokens"] = ctx.masked_lm.masked;  // per sequence
  }
  j["threads"] = o.threads;
  j["strategy"] = o.strategy;
  j["replicas"] = o.replicas;
  j["sparse_embeddings"] = o.sparse_embeddings;
  j["overlap_backward"] = o.overlap_backward;
  j["adversarial"] = o.adversarial.empty() ? "none" : o.adversarial;
  if (ctx.adversarial != nullptr) {
    for (const auto& [key, value] : ctx.adversarial_view.values()) {
      j["adversarial_" + key] = format_value(value);
    }
  }
  if (declares(ctx.strategy, "compression")) {
    j["compression"] = ctx.strategy_view.get_string("compression");
  }
  if (declares(ctx.strategy, "bucket_mb")) {
    j["bucket_mb"] = ctx.strategy_view.get_float("bucket_mb");
  }
  for (const std::string& kv : o.strategy_options) {
    j["strategy." + kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  }
  j["steps"] = o.steps;
  j["step_s"] = step_s;
  j["device"] = ctx.device.str();
  j["precision"] = o.precision;
  j["dropout"] = o.dropout;
  j["dropout_rng"] = o.dropout_rng;
  j["tokens_per_second"] = static_cast<double>(o.batch * o.seq) / step_s;
  j["sequences_per_second"] = static_cast<double>(o.batch) / step_s;
  j["peak_rss_mb"] = peak_rss_mb();
  j["forward_share"] = share(phases.forward);
  j["backward_share"] = share(phases.backward);
  j["comm_share"] = share(phases.comm);
  j["optimizer_share"] = share(phases.optimizer);
  j["comm_dense_bytes"] = phases.dense_bytes;
  j["comm_sparse_bytes"] = phases.sparse_bytes;
  j["optimizer_state_bytes"] = phases.optimizer_state_bytes;
  if (o.overlap_backward) {
    j["overlap_buckets"] = phases.overlap.buckets;
    j["overlap_buckets_in_backward"] = phases.overlap.buckets_in_backward;
  }
  j["encoder_gflop_per_step"] = flops / 1e9;
  j["achieved_gflops"] = flops / step_s / 1e9;
  return j;
}

}  // namespace

namespace {

// `text` as a value of the option `decl` declares; `fail` throws with a message.
OptionValue parse_option_value(const OptionDecl& decl, const std::string& text,
                               const std::function<void(const std::string&)>& fail) {
  const std::string bad = fmt::format(
      "'{}' is not a{} {}", text, decl.type == OptionType::kInt ? "n" : "", to_string(decl.type));
  size_t used = 0;
  try {
    switch (decl.type) {
      case OptionType::kBool:
        if (text != "true" && text != "false") fail(bad);
        return text == "true";
      case OptionType::kInt: {
        const int64_t v = std::stoll(text, &used);
        if (used != text.size()) fail(bad);
        return v;
      }
      case OptionType::kFloat: {
        const double v = std::stod(text, &used);
        if (used != text.size()) fail(bad);
        return v;
      }
      case OptionType::kString:
      case OptionType::kPath:
        if (!decl.allowed.empty() &&
            std::find(decl.allowed.begin(), decl.allowed.end(), text) == decl.allowed.end()) {
          fail(fmt::format("'{}' is not one of {}", text, fmt::join(decl.allowed, ", ")));
        }
        return text;
    }
  } catch (const std::logic_error&) {  // stoll / stod: not a number, or out of range
    fail(bad);
  }
  return text;
}

}  // namespace

std::map<std::string, OptionValue> strategy_option_values(const std::vector<std::string>& flags,
                                                          const Component& strategy,
                                                          const std::string& command) {
  std::map<std::string, OptionValue> values;
  for (const std::string& kv : flags) {
    const auto fail = [&](const std::string& what) {
      throw ConfigError(
          fmt::format("{}: --{}-option {}: {}", command, to_string(strategy.kind), kv, what));
    };
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) fail("write KEY=VALUE, e.g. rank=4");
    const std::string key = kv.substr(0, eq);
    const auto decl = std::find_if(strategy.spec.options.begin(), strategy.spec.options.end(),
                                   [&](const OptionDecl& d) { return d.key == key; });
    if (decl == strategy.spec.options.end()) {
      fail(
          fmt::format("the {} {} has no option '{}' (bertlab plugins --describe {} lists "
                      "them)",
                      strategy.spec.name, to_string(strategy.kind), key, strategy.spec.name));
    }
    values[key] = parse_option_value(*decl, kv.substr(eq + 1), fail);
  }
  return values;
}

int bench_step(const PluginHost& host, const StepBenchOptions& o) {
  check(o.dropout_rng == "per_example" || o.dropout_rng == "replica" || o.dropout_rng == "both",
        fmt::format("--dropout-rng must be per_example, replica or both, got {}", o.dropout_rng));
  if (o.dropout_rng == "both") {
    // The two modes one after the other in this process, each with its own warm-up.
    for (const char* mode : {"replica", "per_example"}) {
      StepBenchOptions one = o;
      one.dropout_rng = mode;
      bench_step(host, one);
    }
    return 0;
  }
  check_options(o);
  const c10::Device device = bench_device(o);
  PrecisionOptions precision;
  precision.precision = o.precision;
  if (device.is_cuda()) set_tf32(o.tf32);
  const BertConfig config = bert_config(o);

  const Component& task_c = component(host, ComponentKind::kTask, o.task);
  const Component& strategy_c = component(host, ComponentKind::kStrategy, o.strategy);
  const Component& optimizer_c = component(host, ComponentKind::kOptimizer, o.optimizer);
  // The task's defaults: no data is read (prepare() is not called), so pretrain's input_file
  // may stay empty.
  const ConfigView task_view("task", task_c.spec.options, {});
  std::unique_ptr<Task> task = task_c.task_factory(task_view);
  // The strategy's defaults, and what the flags set.
  const ConfigView strategy_view("strategy", strategy_c.spec.options,
                                 strategy_values(o, strategy_c));
  const Component* adversarial_c =
      o.adversarial.empty() || o.adversarial == "none"
          ? nullptr
          : &component(host, ComponentKind::kAdversarial, o.adversarial);
  check(adversarial_c != nullptr || o.adversarial_options.empty(),
        "--adversarial-option needs --adversarial fgm, pgd or freelb");
  const ConfigView adversarial_view(
      "adversarial",
      adversarial_c != nullptr ? adversarial_c->spec.options : std::vector<OptionDecl>{},
      adversarial_c != nullptr
          ? strategy_option_values(o.adversarial_options, *adversarial_c, "bench step")
          : std::map<std::string, OptionValue>{});
  set_compute_threads(o.threads);

  const BenchContext ctx{o,
                         device,
                         precision,
                         *task,
                         strategy_c,
                         optimizer_c,
                         strategy_view,
                         adversarial_c,
                         adversarial_view,
                         create_models(*task, config, o, device),
                         o.batch / o.replicas,
                         masked_lm_shape(o, task_c, task_view)};
  Phases phases;  // rank 0's
  // As in training: thread ranks, each drawing its dropout from its own generator.
  run_thread_ranks(o.replicas, std::chrono::seconds(600), device,
                   [&](int rank, Communicator& comm) { run_rank(ctx, rank, comm, phases); });
  std::cout << report(ctx, phases).dump() << "\n";
  return 0;
}

}  // namespace bertlab
