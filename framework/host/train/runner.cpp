// The training engine: runs each variant's ranks through the steps, writes metrics, checkpoints
// and the comparison.

#include "train/runner.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/io/checkpoint.h>
#include <bertlab/io/safetensors.h>
#include <bertlab/log.h>
#include <bertlab/model/init_checkpoint.h>
#include <bertlab/optimizer.h>
#include <bertlab/random.h>
#include <bertlab/strategy.h>
#include <bertlab/text/tokenizer.h>
#include <torch/nn/module.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "comm/gloo_communicator.h"
#include "comm/nccl_communicator.h"
#include "report/report.h"
#include "report/run_outputs.h"
#include "report/tensorboard.h"
#include "runtime/process_rank.h"
#include "runtime/threads.h"
#include "train/overlap_reducer.h"
#include "train/precision.h"
#include "train/progress.h"
#include "train/train_checkpoint.h"

namespace bertlab {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// The global batch order: per epoch a permutation of the training examples drawn from a
/// generator seeded by [experiment] seed, epochs concatenated, consecutive batches of
/// train_batch_size taken from that stream (epochs roll over, as a repeated dataset does).
/// It does not depend on the number of replicas.
class BatchOrder {
 public:
  BatchOrder(int64_t num_examples, int64_t batch_size, uint64_t seed)
      : n_(num_examples), batch_(batch_size), rng_(seed) {}

  /// Skips the first `batches` batches (a resumed run continues where the checkpoint left off).
  void skip(int64_t batches) {
    for (int64_t b = 0; b < batches; ++b) next();
  }

  std::vector<int64_t> next() {
    std::vector<int64_t> out;
    out.reserve(batch_);
    while (static_cast<int64_t>(out.size()) < batch_) {
      if (pos_ == order_.size()) new_epoch();
      out.push_back(order_[pos_++]);
    }
    return out;
  }

 private:
  void new_epoch() {
    order_.resize(n_);
    for (int64_t i = 0; i < n_; ++i) order_[i] = i;
    // Fisher-Yates with our own index draw, so the order is the same with every standard
    // library.
    for (int64_t i = n_ - 1; i > 0; --i) {
      const uint64_t j = rng_() % static_cast<uint64_t>(i + 1);
      std::swap(order_[i], order_[j]);
    }
    pos_ = 0;
  }

  int64_t n_;
  int64_t batch_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  size_t pos_ = 0;
};

/// The device of this process's replicas (validated by resolve_experiment): "cuda" without an
/// index is the device LOCAL_RANK for a launched rank (one GPU per process, as torchrun), else
/// device 0.
c10::Device resolve_device(const std::string& text, const std::optional<ProcessRank>& process) {
  c10::Device device(text);
  if (device.is_cuda() && !device.has_index()) {
    device.set_index(static_cast<c10::DeviceIndex>(process ? process->local_rank : 0));
  }
  return device;
}

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::map<std::string, at::Tensor> snapshot_parameters(const torch::nn::Module& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : model.named_parameters(true)) {
    out[item.key()] = item.value().detach().to(at::kCPU).clone();
  }
  return out;
}

std::string metrics_json(const Metrics& metrics, int64_t global_step) {
  nlohmann::ordered_json j;
  for (const auto& [name, value] : metrics) j[name] = value;
  j["global_step"] = global_step;
  return j.dump(2) + "\n";
}

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// run_summary.json (for `bertlab compare`) and, with [experiment] tensorboard, the variant's
/// TensorBoard event file, both from the finished variant's files.
void write_variant_summary(const ResolvedExperiment& experiment, const ResolvedVariant& variant,
                           const VariantResult& result, double start_time) {
  RunSummary summary;
  summary.experiment = experiment.name;
  summary.experiment_file = experiment.file.string();
  summary.reference = experiment.reference;
  summary.variant = variant.name;
  summary.steps = result.steps;
  summary.final_loss = result.final_loss;
  summary.examples_per_second = result.examples_per_second;
  summary.wall_time_s = result.wall_time_s;
  summary.start_time = start_time;
  write_file_atomic(result.dir / "run_summary.json", summary_json(summary));
  if (!variant.experiment.get_bool("tensorboard") || !is_variant_dir(result.dir)) return;
  const VariantOutputs outputs = read_variant_outputs(result.dir);
  const fs::path events =
      write_event_file(result.dir, start_time, variant_events(outputs, start_time));
  log_info("train", "variant '{}': TensorBoard events {}", variant.name, events.string());
}

/// What every rank's training loop needs; shared read-only by the rank threads.
struct TrainLoop {
  const ResolvedVariant* experiment_variant = nullptr;
  const Task* task = nullptr;
  c10::Device device = c10::Device(c10::kCPU);
  uint64_t seed = 0;
  int64_t num_examples = 0;
  int64_t batch_size = 0;                 ///< examples per optimizer step (all micro-batches)
  int64_t accumulation = 1;               ///< micro-batches per optimizer step
  bool per_example_dropout = true;        ///< [model] dropout_rng = "per_example"
  bool global_loss_normalization = true;  ///< [strategy] loss_normalization = "global"
  int64_t num_train_steps = 0;
  int64_t log_every = 1;
  fs::path dir;
  Clock::time_point start;
  int64_t stop_after = 0;       ///< steps to run (<= num_train_steps)
  int64_t check_every = 100;    ///< steps between cross-replica parameter checksums
  bool skip_nonfinite = false;  ///< [train] on_nonfinite = "skip_step"
  PrecisionOptions precision;   ///< [train] precision, loss scaling
  bool write_metrics = true;
  const RunHooks* hooks = nullptr;
  const TrainCheckpoint* resume = nullptr;  ///< continue from this checkpoint's state
  int64_t save_every = 0;                   ///< steps between checkpoints; 0: none
  int64_t keep_max = 5;                     ///< newest checkpoints kept; 0: all
  fs::path checkpoint_root;                 ///< VARIANT/checkpoints
};

/// The factor of a token-weighted task's weighted_loss_sum in one replica's objective, so that
/// the strategies' mean over N replicas is Σ weighted losses / Σ weights of the whole step
/// ("global", hence N / global weight) or the mean of each replica's own mean ("per_replica").
/// 0 for other tasks or a step without any weight.
double token_weight_scale(const TrainLoop& loop, const std::vector<Batch>& micro_batches,
                          Communicator& comm, int64_t world) {
  if (!loop.task->token_weighted_loss()) return 0.0;
  double weight = 0.0;
  for (const Batch& batch : micro_batches) weight += loop.task->loss_weight(batch);
  if (!loop.global_loss_normalization) return weight > 0 ? 1.0 / weight : 0.0;
  if (world > 1) {
    std::vector<at::Tensor> w{at::tensor({weight}, at::kDouble)};
    comm.all_reduce_sum(w);
    weight = w[0].item<double>();
  }
  return weight > 0 ? static_cast<double>(world) / weight : 0.0;
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

// SIGINT / SIGTERM: the first sets this (the run stops after the current step, with a
// checkpoint); the handler then restores the default, so that a second signal kills at once.
std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int signal) {
  g_stop_signal.store(signal);
  std::signal(signal, SIG_DFL);
}

const char* signal_name(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

struct TrainOutcome {
  int64_t steps = 0;
  double train_seconds = 0.0;
  double final_loss = 0.0;
};

/// Every replica applied the same averaged gradient with the same optimizer, so their
/// parameters must be bitwise equal. Compares per-parameter checksums (sum and sum of squares,
/// in double) with every other rank; a difference names the step, the parameter and the ranks.
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

/// One rank's training loop (docs/architecture.md, "One training step"). Rank 0 also logs and
/// writes metrics.jsonl. Every rank holds identical parameters after each step.
TrainOutcome train_rank(const TrainLoop& loop, torch::nn::Module& model, Communicator& comm) {
  const ResolvedVariant& variant = *loop.experiment_variant;
  const int rank = comm.rank();
  const int world = comm.world_size();
  const bool leader = rank == 0;
  const bool write = leader && loop.write_metrics;
  std::unique_ptr<Strategy> strategy =
      variant.strategy.component->strategy_factory(variant.strategy.options);
  std::unique_ptr<Optimizer> optimizer =
      variant.optimizer.component->optimizer_factory(variant.optimizer.options);
  std::vector<NamedTensor> parameters;
  for (const auto& item : model.named_parameters(true)) {
    parameters.push_back({item.key(), item.value()});
  }
  optimizer->init(parameters, OptimizerContext{loop.num_train_steps});
  // A strategy that asks for it gets its dense buckets all-reduced while backward runs.
  std::unique_ptr<OverlapReducer> overlap;
  if (world > 1 && strategy->overlap_bucket_mb() > 0) {
    overlap = std::make_unique<OverlapReducer>(model, comm, strategy->overlap_bucket_mb());
  }
  const int64_t first_step = loop.resume != nullptr ? loop.resume->state.step : 0;
  if (loop.resume != nullptr) optimizer->load_state_dict(loop.resume->optimizer);

  const fs::path metrics_path = loop.dir / "metrics.jsonl";
  // Written as metrics.jsonl.partial, flushed every line (kept when the run stops early), and put
  // in place at the end.
  std::unique_ptr<AtomicFile> metrics_out;
  // Every line logged so far, for checkpoints: a resumed run's metrics.jsonl continues it.
  std::string metrics_text = loop.resume != nullptr ? loop.resume->state.metrics_lines : "";
  if (write) {
    metrics_out = std::make_unique<AtomicFile>(metrics_path, fs::path(), /*keep_partial=*/true);
    metrics_out->write(metrics_text);
  }
  Progress progress(variant.name, loop.num_train_steps);
  const int64_t micro = loop.batch_size / loop.accumulation;  // examples per micro-batch
  const int64_t shard = micro / world;
  // Indexed data: the seeded batch order, skipping the steps done. Streamed data: this rank's
  // stream, from the checkpoint's position.
  std::optional<BatchOrder> order;
  std::unique_ptr<TrainStream> stream;
  if (loop.task->streams_train_data()) {
    stream = loop.task->open_train_stream(
        StreamShard{micro, rank * shard, shard},
        loop.resume != nullptr ? loop.resume->state.data_position : std::string());
    BERTLAB_CHECK(stream != nullptr, "the task streams its training data but opened no stream");
  } else {
    order.emplace(loop.num_examples, loop.batch_size, loop.seed);
    order->skip(first_step);
  }
  // fp16's dynamic loss scale; every rank's stays the same (they see the same averaged grads).
  LossScaler scaler(loop.precision);
  const c10::ScalarType autocast_dtype = loop.precision.autocast_dtype();
  TrainOutcome outcome;
  double window_loss = 0.0;
  int64_t window_steps = 0;      // steps of the logging window with a finite loss
  int64_t window_all = 0;        // all steps of the logging window run here
  int64_t skipped_steps = 0;     // updates skipped for a non-finite loss or gradient
  double earlier_seconds = 0.0;  // training time of the run that wrote the checkpoint
  if (loop.resume != nullptr) {
    window_loss = loop.resume->state.window_loss;
    window_steps = loop.resume->state.window_steps;
    skipped_steps = loop.resume->state.skipped_steps;
    outcome.final_loss = loop.resume->state.final_loss;
    outcome.steps = first_step;
    earlier_seconds = loop.resume->state.train_seconds;
    if (scaler.enabled()) {
      scaler.restore(loop.resume->state.loss_scale, loop.resume->state.loss_scale_growth_tracker);
    }
  }
  // Per-step sums over the logging window: time by phase, this rank's collective payload.
  struct Window {
    double data_s = 0, compute_s = 0, comm_s = 0, optimizer_s = 0;
    int64_t dense_bytes = 0, sparse_bytes = 0;
    int64_t overlap_buckets = 0, overlap_buckets_in_backward = 0;
  } window;
  auto window_start = Clock::now();
  const auto train_start = Clock::now();
  // A resumable checkpoint after `done` steps (rank 0).
  auto save_checkpoint = [&](int64_t done) {
    TrainState state;
    state.step = done;
    state.window_loss = window_loss;
    state.window_steps = window_steps;
    state.skipped_steps = skipped_steps;
    state.final_loss = outcome.final_loss;
    state.train_seconds = earlier_seconds + seconds_since(train_start);
    state.loss_scale = scaler.scale();
    state.loss_scale_growth_tracker = scaler.growth_tracker();
    state.metrics_lines = metrics_text;
    if (stream) state.data_position = stream->position();
    {
      // This rank's draws (dropout); every rank's generator is in the same state.
      at::Generator generator = replica_generator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      state.rng_state = generator.get_state();
    }
    save_train_checkpoint(loop.checkpoint_root, state, model, *optimizer, variant.resolved_toml,
                          loop.keep_max);
  };
  model.train();
  for (int64_t step = first_step; step < loop.stop_after; ++step) {
    // Micro-batch m of the step is examples [m*B, (m+1)*B) of the step's k*B; replica r takes
    // [r*B/N, (r+1)*B/N) of it.
    const auto t_data = Clock::now();
    std::vector<Batch> micro_batches;
    if (stream) {
      for (int64_t m = 0; m < loop.accumulation; ++m)
        micro_batches.push_back(stream->next(loop.device));
    } else {
      const std::vector<int64_t> global = order->next();
      for (int64_t m = 0; m < loop.accumulation; ++m) {
        const auto begin = global.begin() + m * micro + rank * shard;
        micro_batches.push_back(
            loop.task->make_train_batch(std::vector<int64_t>(begin, begin + shard), loop.device));
      }
    }
    const auto t0 = Clock::now();
    window.data_s += std::chrono::duration<double>(t0 - t_data).count();
    const double weight_scale = token_weight_scale(loop, micro_batches, comm, world);
    model.zero_grad(/*set_to_none=*/true);
    comm.reset_traffic();
    // Backward once per micro-batch: the gradients add up to the k-times larger batch's.
    double local_loss = 0.0;
    for (size_t m = 0; m < micro_batches.size(); ++m) {
      const Batch& batch = micro_batches[m];
      at::Tensor objective;
      {
        // Per-example masks: keyed by the example's place in the step's global batch.
        std::optional<PerExampleDropoutScope> masks;
        if (loop.per_example_dropout) {
          const int64_t examples = batch.empty() ? shard : batch.begin()->second.size(0);
          masks.emplace(DropoutKey{loop.seed, step, static_cast<int64_t>(m) * micro + rank * shard,
                                   examples});
        }
        // The forward pass only: backward runs outside autocast, as torch.autocast advises.
        AutocastScope autocast(autocast_dtype, loop.device);
        LossOutput out = loop.task->compute_loss(model, batch);
        if (out.loss.defined()) objective = out.loss / static_cast<double>(loop.accumulation);
        if (out.weighted_loss_sum.defined()) {
          const at::Tensor weighted = out.weighted_loss_sum * weight_scale;
          objective = objective.defined() ? objective + weighted : weighted;
        }
      }
      BERTLAB_CHECK(objective.defined(), "the task's compute_loss returned no loss");
      // Only the last backward completes the gradients (the earlier ones accumulate, as DDP's
      // no_sync): its hooks start the all-reduces.
      if (overlap && m + 1 == micro_batches.size()) overlap->arm();
      if (scaler.enabled()) {
        (objective.to(at::kFloat) * scaler.scale()).backward();
      } else {
        objective.backward();
      }
      local_loss += objective.item<double>();
    }
    GradientSet grads = GradientSet::from_module(model);
    const auto t1 = Clock::now();
    // Communication time is what is left exposed after backward: the overlapped buckets' wait.
    if (overlap) {
      const OverlapStats overlap_stats = overlap->finish();
      overlap->mark_averaged(grads);
      window.overlap_buckets += overlap_stats.buckets;
      window.overlap_buckets_in_backward += overlap_stats.buckets_in_backward;
    }
    strategy->reduce_gradients(grads, comm);
    // Scaled losses give scaled gradients; the optimizer (and its clipping) sees true ones.
    const double step_scale = scaler.scale();
    if (scaler.enabled()) grads.scale(1.0 / step_scale);
    const auto t2 = Clock::now();
    window.dense_bytes += comm.traffic_bytes(Traffic::kDense);
    window.sparse_bytes += comm.traffic_bytes(Traffic::kSparse);
    if (leader && loop.hooks->on_averaged) loop.hooks->on_averaged(step, grads);
    // The global batch's loss: the replicas' objectives are scaled so that their mean is it.
    double loss = local_loss;
    if (world > 1) {
      std::vector<at::Tensor> l{at::tensor({loss}, at::kDouble)};
      comm.all_reduce_sum(l);
      loss = l[0].item<double>() / world;
    }
    // Every rank holds the same loss and averaged gradients, so all decide alike. An optimizer
    // given a non-finite gradient leaves the parameters alone and returns its norm.
    StepStats stats;
    if (std::isfinite(loss)) {
      stats = optimizer->step(grads, step);
    } else {
      stats.learning_rate = optimizer->learning_rate(step);
      stats.grad_norm = std::numeric_limits<double>::quiet_NaN();
    }
    const bool finite = std::isfinite(loss) && std::isfinite(stats.grad_norm);
    scaler.update(finite);
    if (!finite && scaler.enabled()) {
      // An overflow of the scaled fp16 gradient is expected now and then: skip, back off.
      ++skipped_steps;
      if (leader) {
        log_info("train",
                 "step {}: the gradient overflowed at loss scale {}; update skipped, "
                 "scale now {}",
                 step + 1, step_scale, scaler.scale());
      }
    } else if (!finite) {
      const std::string what =
          std::isfinite(loss) ? fmt::format("the gradient of {} is not finite (global norm {})",
                                            first_nonfinite_gradient(grads), stats.grad_norm)
                              : fmt::format("the loss is {}", loss);
      if (!loop.skip_nonfinite) {
        throw Error(
            fmt::format("[train] step {}: {}; lower the learning rate or check the data, or set "
                        "train.on_nonfinite = \"skip_step\" to skip such steps",
                        step + 1, what));
      }
      ++skipped_steps;
      if (leader)
        log_warning("train", "step {}: {}; update skipped ({} so far)", step + 1, what,
                    skipped_steps);
    }
    const auto t3 = Clock::now();
    window.compute_s += std::chrono::duration<double>(t1 - t0).count();
    window.comm_s += std::chrono::duration<double>(t2 - t1).count();
    window.optimizer_s += std::chrono::duration<double>(t3 - t2).count();
    if (world > 1 && ((step + 1) % loop.check_every == 0 || step + 1 == loop.stop_after)) {
      check_replicas_agree(model, comm, step + 1);
    }
    outcome.steps = step + 1;
    ++window_all;
    if (finite) {
      window_loss += loss;
      ++window_steps;
    }
    if (leader && loop.hooks->on_loss) loop.hooks->on_loss(step, loss);
    // SIGINT/SIGTERM stops every rank after the same step: rank threads read the flag at
    // different moments and processes each get their own signal, so the ranks agree through
    // one all-reduce (rank 0 then writes a checkpoint below).
    double stop_flag = g_stop_signal.load();
    if (world > 1) {
      std::vector<at::Tensor> flag{at::tensor({stop_flag}, at::kDouble)};
      comm.all_reduce_sum(flag);
      stop_flag = flag[0].item<double>();
    }
    const bool stopping = stop_flag != 0 && step + 1 < loop.stop_after;
    const int stop_signal = g_stop_signal.load() != 0 ? g_stop_signal.load() : SIGTERM;
    if (stopping && !write) {
      throw Interrupted(fmt::format("bertlab: {}: rank {} stopped after step {}",
                                    signal_name(stop_signal), rank, step + 1),
                        stop_signal);
    }
    if (!write) continue;
    const bool last = step + 1 == loop.num_train_steps;
    progress.update(step + 1, loss,
                    static_cast<double>((step + 1 - first_step) * loop.batch_size) /
                        seconds_since(train_start));
    if ((step + 1) % loop.log_every == 0 || last) {
      const double window_s = seconds_since(window_start);
      nlohmann::ordered_json line;
      line["step"] = step + 1;
      if (loop.num_examples > 0) {
        line["epoch"] = static_cast<double>((step + 1) * loop.batch_size) /
                        static_cast<double>(loop.num_examples);
      }
      // null when every step of the window was skipped.
      line["loss"] = window_steps > 0 ? window_loss / static_cast<double>(window_steps)
                                      : std::numeric_limits<double>::quiet_NaN();
      line["learning_rate"] = stats.learning_rate;
      line["grad_norm"] = stats.grad_norm;
      line["examples_per_second"] =
          static_cast<double>(window_all * loop.batch_size) / std::max(window_s, 1e-9);
      line["elapsed_s"] = seconds_since(loop.start);
      const double n = static_cast<double>(std::max<int64_t>(window_all, 1));
      line["data_s"] = window.data_s / n;
      line["compute_s"] = window.compute_s / n;
      line["comm_s"] = window.comm_s / n;
      line["optimizer_s"] = window.optimizer_s / n;
      line["comm_dense_bytes"] = static_cast<double>(window.dense_bytes) / n;
      line["skipped_steps"] = skipped_steps;
      if (scaler.enabled()) line["loss_scale"] = scaler.scale();
      line["comm_sparse_bytes"] = static_cast<double>(window.sparse_bytes) / n;
      if (overlap) {
        // Per step: the buckets all-reduced, and those started while backward still ran.
        line["overlap_buckets"] = static_cast<double>(window.overlap_buckets) / n;
        line["overlap_buckets_in_backward"] =
            static_cast<double>(window.overlap_buckets_in_backward) / n;
      }
      metrics_out->write(line.dump() + "\n");
      metrics_out->flush();
      metrics_text += line.dump() + "\n";
      if (window_steps > 0) outcome.final_loss = window_loss / static_cast<double>(window_steps);
      progress.log_line(
          step + 1, outcome.final_loss, stats.learning_rate,
          line["examples_per_second"].get<double>(),
          format_eta(seconds_since(train_start) / static_cast<double>(step + 1 - first_step) *
                     static_cast<double>(loop.num_train_steps - step - 1)));
      window_loss = 0.0;
      window_steps = 0;
      window_all = 0;
      window = Window();
      window_start = Clock::now();
    }
    if (loop.save_every > 0 && (step + 1) % loop.save_every == 0) {
      save_checkpoint(step + 1);
      log_info("train", "step {}: checkpoint {}", step + 1,
               train_checkpoint_dir(loop.checkpoint_root, step + 1).string());
    }
    if (stopping) {
      std::string where = "no checkpoint";
      if (!loop.checkpoint_root.empty()) {
        if (!(loop.save_every > 0 && (step + 1) % loop.save_every == 0)) save_checkpoint(step + 1);
        where = fmt::format("checkpoint {}; run the same command with --resume to continue",
                            train_checkpoint_dir(loop.checkpoint_root, step + 1).string());
      }
      metrics_out.reset();  // metrics.jsonl.partial stays: the steps done so far
      throw Interrupted(
          fmt::format("bertlab: {} during variant '{}': stopped after step {} of {}; {}",
                      signal_name(stop_signal), variant.name, step + 1, loop.num_train_steps,
                      where),
          stop_signal);
    }
  }
  outcome.train_seconds = earlier_seconds + seconds_since(train_start);
  if (write) {
    progress.finish();
    metrics_out->commit();
  }
  return outcome;
}

/// Refuses to train when the ranks' resolved configurations differ (a rank started with other
/// --set values, another experiment file, other data): every rank publishes its resolved.toml
/// and compares it with every other's; the error lists each key that differs, by rank.
void check_same_configuration(const RendezvousStore& store, const ProcessRank& process,
                              const std::string& resolved_toml, std::chrono::milliseconds timeout) {
  const auto all =
      exchange_text(store, "config", resolved_toml, process.rank, process.world_size, timeout);
  std::vector<std::map<std::string, std::string>> settings;
  settings.reserve(static_cast<size_t>(process.world_size));
  for (int r = 0; r < process.world_size; ++r) {
    settings.push_back(flatten_resolved_toml(all[r], fmt::format("rank {}'s configuration", r)));
  }
  std::set<std::string> keys;
  for (const auto& one : settings) {
    for (const auto& [k, v] : one) keys.insert(k);
  }
  std::vector<std::string> differences;
  for (const auto& key : keys) {
    std::vector<std::string> values;
    for (const auto& one : settings) {
      auto it = one.find(key);
      values.push_back(it == one.end() ? "(unset)" : it->second);
    }
    if (std::all_of(values.begin(), values.end(), [&](const auto& v) { return v == values[0]; })) {
      continue;
    }
    std::vector<std::string> by_rank;
    for (size_t r = 0; r < values.size(); ++r)
      by_rank.push_back(fmt::format("rank {}: {}", r, values[r]));
    differences.push_back(
        fmt::format("{} differs between the ranks ({})", key, fmt::join(by_rank, ", ")));
  }
  if (differences.empty()) return;
  differences.push_back(fmt::format(
      "[comm] rank {} of {}: every rank must run the same configuration; start them all with the "
      "same experiment file and --set arguments",
      process.rank, process.world_size));
  throw ConfigError(differences);
}

/// This process is one rank of a launched run: it joins the others through a TCP store at
/// MASTER_ADDR:MASTER_PORT (one per process, shared by its variants under a per-variant prefix).
TrainOutcome train_process_rank(const TrainLoop& loop, torch::nn::Module& model,
                                const ProcessRank& process, double timeout_s,
                                const std::string& group_name) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
  static std::shared_ptr<RendezvousStore> base;
  if (!base) {
    base = RendezvousStore::tcp(process.master_addr, process.master_port, process.rank,
                                process.world_size, timeout);
  }
  auto store = RendezvousStore::prefixed(*base, group_name);
  // backend "auto": NCCL between CUDA processes (one device each), Gloo otherwise. NCCL picks
  // its own interface (NCCL_SOCKET_IFNAME).
  const std::string backend = loop.experiment_variant->strategy_host.get_string("backend");
  const bool nccl = backend == "nccl" || (backend == "auto" && loop.device.is_cuda());
  const GlooBinding binding = nccl ? GlooBinding{} : choose_gloo_binding(process.master_addr);
  log_info("comm", "rank {} of {}: {} over TCP store {}:{} ({}), device {}{}", process.rank,
           process.world_size, nccl ? "NCCL" : "Gloo", process.master_addr, process.master_port,
           process.master_from, loop.device.str(),
           nccl ? "" : fmt::format(", Gloo bound to {}", binding.describe()));
  // Through the store first: a rank that never arrives is named here, before the group's
  // connections would only say that they timed out.
  check_same_configuration(*store, process, loop.experiment_variant->resolved_toml, timeout);
  auto comm = nccl ? make_nccl_communicator(*store, process.rank, process.world_size, timeout,
                                            loop.device.index())
                   : make_gloo_communicator(*store, process.rank, process.world_size, timeout,
                                            binding, loop.device);
  return train_rank(loop, model, *comm);
}

/// Runs train_rank on every replica: on this thread for one, else one thread per rank joined
/// through an in-process store. The first failure is rethrown; a rank that failed on its own
/// is reported before the ranks that then timed out waiting for it.
TrainOutcome train_replicas(const TrainLoop& loop,
                            const std::vector<std::shared_ptr<torch::nn::Module>>& models,
                            double timeout_s) {
  const int world = static_cast<int>(models.size());
  if (world == 1) {
    auto comm = make_local_communicator();
    return train_rank(loop, *models.front(), *comm);
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
  auto store = RendezvousStore::in_process();
  std::vector<std::exception_ptr> errors(world);
  std::vector<bool> comm_failure(world, false);
  TrainOutcome outcome;
  // Each thread rank draws (dropout) from its own copy of the seeded generator, as a process
  // rank draws from its own: the same numbers, in an order that does not depend on timing.
  std::vector<at::Generator> generators;
  {
    at::Generator seeded = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(seeded.mutex());
    for (int r = 0; r < world; ++r) generators.push_back(seeded.clone());
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        ReplicaGeneratorScope draws(generators[r]);
        // Thread ranks share this process's device: Gloo (NCCL wants a device per rank).
        auto comm = make_gloo_communicator(*store, r, world, timeout, GlooBinding{}, loop.device);
        TrainOutcome mine = train_rank(loop, *models[r], *comm);
        if (r == 0) outcome = mine;
      } catch (const Error& e) {
        comm_failure[r] = std::string(e.what()).rfind("[comm]", 0) == 0;
        errors[r] = std::current_exception();
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    if (errors[r] && !comm_failure[r]) std::rethrow_exception(errors[r]);
  }
  for (int r = 0; r < world; ++r) {
    if (errors[r]) std::rethrow_exception(errors[r]);
  }
  return outcome;
}

/// Copies `tensors` (bertlab names) into `model`'s parameters; every parameter must be there.
void load_parameters(torch::nn::Module& model, const NamedTensors& tensors, const fs::path& file) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, t] : tensors) by_name[name] = &t;
  c10::NoGradGuard no_grad;
  for (auto& item : model.named_parameters(true)) {
    auto it = by_name.find(item.key());
    BERTLAB_CHECK_AS(DataError, it != by_name.end(), "{}: parameter {} is missing", file.string(),
                     item.key());
    BERTLAB_CHECK_AS(DataError, it->second->sizes().equals(item.value().sizes()),
                     "{}: parameter {} has shape [{}], the model [{}]", file.string(), item.key(),
                     fmt::join(it->second->sizes(), ", "), fmt::join(item.value().sizes(), ", "));
    item.value().copy_(*it->second);
  }
}

/// [train] resume: the newest complete checkpoint of this variant, checked against the current
/// configuration; nullopt when there is none yet (the run starts from step 0).
std::optional<TrainCheckpoint> find_resume_checkpoint(const ResolvedVariant& variant,
                                                      const fs::path& root) {
  const auto all = list_train_checkpoints(root);
  if (all.empty()) {
    log_info("train", "variant '{}': resume: no checkpoint in {} yet; starting from step 0",
             variant.name, root.string());
    return std::nullopt;
  }
  TrainCheckpoint ckpt = load_train_checkpoint(all.back());
  for (const auto& change :
       compare_resume_config(ckpt.resolved_toml, variant.resolved_toml, ckpt.dir)) {
    log_warning("train", "variant '{}': resuming with a changed setting: {}", variant.name, change);
  }
  log_info("train", "variant '{}': resuming from {} (step {})", variant.name, ckpt.dir.string(),
           ckpt.state.step);
  return ckpt;
}

/// [model] init_checkpoint: every replica's model from the same checkpoint; the report goes to
/// VARIANT/init_report.json when `dir` is set.
void init_models_from_checkpoint(const ResolvedVariant& variant,
                                 const std::vector<std::shared_ptr<torch::nn::Module>>& models,
                                 const std::optional<fs::path>& report_dir) {
  const fs::path path = variant.model.get_path("init_checkpoint");
  Checkpoint checkpoint;
  try {
    checkpoint = read_checkpoint(path);
  } catch (const DataError& e) {
    throw DataError(fmt::format("[model] init_checkpoint: {}", e.what()));
  }
  std::vector<std::string> exclude;
  std::stringstream list(variant.model.get_string("init_checkpoint_exclude"));
  for (std::string part; std::getline(list, part, ',');) {
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (!part.empty()) exclude.push_back(part);
  }
  InitReport report;
  for (const auto& model : models) {
    report = init_from_checkpoint(*model, checkpoint, variant.bert_config, exclude);
  }
  log_info("model", "variant '{}': init_checkpoint {}", variant.name, report.summary());
  if (report_dir) write_file_atomic(*report_dir / "init_report.json", report.to_json());
}

}  // namespace

VariantResult run_variant(const ResolvedExperiment& experiment, const ResolvedVariant& variant,
                          const RunHooks& hooks) {
  // In a launched run only rank 0's process writes files.
  const bool files = hooks.max_steps == 0 && !is_secondary_process();
  const bool env_launcher = variant.strategy_host.get_string("launcher") == "env";
  std::optional<ProcessRank> process;
  if (env_launcher) {
    process = process_rank_from_env();
    if (!process) {
      throw ConfigError(fmt::format(
          "strategy.launcher: variant '{}' uses launcher = \"env\", but RANK and WORLD_SIZE are "
          "not set (nor Slurm's SLURM_PROCID and SLURM_NTASKS); start its {} ranks with "
          "`bertlab launch --nproc {} -- bertlab ...`, `torchrun --nproc-per-node {} --no-python "
          "bertlab ...` or `srun -n {} bertlab ...` (docs/distributed.md)",
          variant.name, variant.strategy_host.get_int("replicas"),
          variant.strategy_host.get_int("replicas"), variant.strategy_host.get_int("replicas"),
          variant.strategy_host.get_int("replicas")));
    }
    if (process->world_size != variant.strategy_host.get_int("replicas")) {
      throw ConfigError(fmt::format(
          "strategy.replicas: variant '{}' declares {} replicas but WORLD_SIZE is {}; make them "
          "equal",
          variant.name, variant.strategy_host.get_int("replicas"), process->world_size));
    }
  }
  const auto start = Clock::now();
  const double start_time = unix_time_now();
  VariantResult result;
  result.name = variant.name;
  result.dir = experiment.output_dir / experiment.name / variant.name;
  if (files) {
    fs::create_directories(result.dir);
    write_file_atomic(result.dir / "resolved.toml", variant.resolved_toml);
  }

  int threads = static_cast<int>(variant.experiment.get_int("threads"));
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Replicas are threads of this process: they share the cores.
  const int64_t sharing =
      env_launcher ? process->local_world_size : variant.strategy_host.get_int("replicas");
  set_compute_threads(std::max<int>(1, threads / static_cast<int>(sharing)));
  const auto seed = static_cast<uint64_t>(variant.experiment.get_int("seed"));
  const c10::Device device = resolve_device(variant.strategy_host.get_string("device"), process);
  log_info(
      "train",
      "variant '{}': task {}, strategy {}, optimizer {}, {} thread(s), device {}, precision {}",
      variant.name, variant.task.plugin, variant.strategy.plugin, variant.optimizer.plugin, threads,
      device.str(), variant.train.get_string("precision"));
  if (device.is_cuda()) set_tf32(variant.train.get_bool("allow_tf32"));

  // Data.
  FullTokenizer tokenizer(variant.model.get_path("vocab_file"),
                          variant.model.get_bool("do_lower_case"));
  std::unique_ptr<Task> task = variant.task.component->task_factory(variant.task.options);
  TaskContext task_ctx{&variant.bert_config, &tokenizer, seed, result.dir};
  task->prepare(task_ctx);

  // One model per replica, identically initialized from the seed (each replica draws the same
  // sequence from the freshly seeded generator).
  const bool sparse = variant.model.get_bool("sparse_embeddings");
  // Thread ranks: one model per replica here. Process ranks: this process's one.
  const int replicas =
      env_launcher ? 1 : static_cast<int>(variant.strategy_host.get_int("replicas"));
  std::vector<std::shared_ptr<torch::nn::Module>> models;
  for (int r = 0; r < replicas; ++r) {
    at::manual_seed(seed);
    models.push_back(task->create_model(variant.bert_config, sparse));
    models.back()->to(device);
  }
  std::shared_ptr<torch::nn::Module> model = models.front();

  // Initial weights: a resumable checkpoint of this variant, else [model] init_checkpoint.
  const fs::path checkpoint_root = result.dir / "checkpoints";
  std::optional<TrainCheckpoint> resume;
  // Every rank resumes (a launched run's other processes read rank 0's checkpoints); only rank
  // 0 writes them.
  if (hooks.max_steps == 0 && variant.train.get_bool("resume")) {
    resume = find_resume_checkpoint(variant, checkpoint_root);
  }
  if (resume) {
    for (const auto& m : models) {
      load_parameters(*m, resume->model, resume->dir / "model.safetensors");
    }
    if (resume->state.rng_state.defined()) {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(resume->state.rng_state);
    }
  } else if (!variant.model.get_path("init_checkpoint").empty()) {
    init_models_from_checkpoint(variant, models,
                                files ? std::optional<fs::path>(result.dir) : std::nullopt);
  }

  const bool do_train = variant.train.get_bool("do_train");
  const int64_t accumulation = variant.train.get_int("gradient_accumulation_steps");
  // Examples per optimizer step: k micro-batches of train_batch_size.
  const int64_t batch_size = variant.train.get_int("train_batch_size") * accumulation;
  const int64_t num_examples = task->num_train_examples();
  int64_t num_train_steps = variant.train.get_int("num_train_steps");
  if (num_train_steps == 0) {
    // As run_classifier.py: int(len(train_examples) / train_batch_size * num_train_epochs).
    num_train_steps =
        static_cast<int64_t>(static_cast<double>(num_examples) / static_cast<double>(batch_size) *
                             variant.train.get_float("num_train_epochs"));
  }
  if (do_train && num_train_steps <= 0 && task->streams_train_data()) {
    throw ConfigError(fmt::format(
        "train.num_train_steps: task {} streams its training data (its size is not known "
        "before reading it), so set train.num_train_steps, as run_pretraining.py needs",
        variant.task.plugin));
  }
  if (do_train && num_train_steps <= 0) {
    throw ConfigError(fmt::format(
        "train.num_train_epochs: {} training examples, train_batch_size {} and {} epochs give 0 "
        "steps; lower train_batch_size or set train.num_train_steps",
        num_examples, batch_size, variant.train.get_float("num_train_epochs")));
  }

  TrainLoop loop;
  loop.experiment_variant = &variant;
  loop.task = task.get();
  loop.device = device;
  loop.seed = seed;
  loop.num_examples = num_examples;
  loop.batch_size = batch_size;
  loop.accumulation = accumulation;
  loop.per_example_dropout = variant.model.get_string("dropout_rng") == "per_example";
  loop.global_loss_normalization =
      variant.strategy_host.get_string("loss_normalization") == "global";
  loop.num_train_steps = num_train_steps;
  loop.log_every = variant.train.get_int("log_every_steps");
  loop.dir = result.dir;
  loop.start = start;
  // gradcheck stops after its steps; a run trains every step, on every rank (a launched run's
  // secondary processes write no files but train as long as rank 0).
  loop.stop_after =
      hooks.max_steps > 0 ? std::min(num_train_steps, hooks.max_steps) : num_train_steps;
  loop.write_metrics = files;
  loop.hooks = &hooks;
  loop.check_every = variant.strategy_host.get_int("check_every_steps");
  loop.skip_nonfinite = variant.train.get_string("on_nonfinite") == "skip_step";
  loop.precision = PrecisionOptions::from_config(variant.train);
  loop.resume = resume ? &*resume : nullptr;
  loop.save_every = files ? variant.train.get_int("save_checkpoints_steps") : 0;
  loop.keep_max = variant.train.get_int("keep_checkpoint_max");
  loop.checkpoint_root = checkpoint_root;
  TrainOutcome outcome;
  if (do_train) {
    const std::string micro_batches =
        accumulation > 1 ? fmt::format(" in {} micro-batches", accumulation) : "";
    // Replicas of this step: threads of this process, or the launched processes.
    const int64_t ranks = env_launcher ? process->world_size : replicas;
    if (task->streams_train_data()) {
      log_info("train", "streamed examples, batch {} over {} replica(s){}, {} steps", batch_size,
               ranks, micro_batches, num_train_steps);
    } else {
      log_info("train", "{} examples, batch {} over {} replica(s){}, {} steps ({} per epoch)",
               num_examples, batch_size, ranks, micro_batches, num_train_steps,
               num_examples / batch_size);
    }
    const double timeout_s = variant.strategy_host.get_float("timeout_s");
    outcome = env_launcher ? train_process_rank(loop, *model, *process, timeout_s,
                                                experiment.name + "/" + variant.name)
                           : train_replicas(loop, models, timeout_s);
  }
  const int64_t step = outcome.steps;
  const double train_seconds = outcome.train_seconds;
  result.final_loss = outcome.final_loss;
  result.steps = step;
  result.examples_per_second =
      train_seconds > 0 ? static_cast<double>(step * batch_size) / train_seconds : 0.0;

  if (files && variant.train.get_bool("do_eval")) {
    model->eval();
    EvalContext eval_ctx{device, variant.train.get_int("eval_batch_size"), result.dir};
    AutocastScope autocast(loop.precision.autocast_dtype(), device);
    result.eval_metrics = task->evaluate(*model, eval_ctx);
    write_file_atomic(result.dir / "eval_results.json", metrics_json(result.eval_metrics, step));
    std::string summary;
    for (const auto& [name, value] : result.eval_metrics) {
      summary += fmt::format(" {} {:.4f}", name, value);
    }
    log_info("eval", "variant '{}':{}", variant.name, summary);
  }
  result.final_parameters = snapshot_parameters(*model);
  if (files) {
    NamedTensors weights(result.final_parameters.begin(), result.final_parameters.end());
    write_safetensors(result.dir / "model.safetensors", weights,
                      {{"format", "pt"},
                       {"bertlab_variant", variant.name},
                       {"global_step", std::to_string(step)},
                       {"bert_config", variant.bert_config.to_json()}});
  }
  result.wall_time_s = seconds_since(start);
  if (files) write_variant_summary(experiment, variant, result, start_time);
  log_info("train", "variant '{}' done in {:.1f} s, {:.1f} examples/s; outputs in {}", variant.name,
           result.wall_time_s, result.examples_per_second, result.dir.string());
  return result;
}

std::string run_experiment(const ResolvedExperiment& experiment, const PluginHost& host) {
  (void)host;
  // From here on SIGINT and SIGTERM stop training after the current step, with a checkpoint.
  g_stop_signal.store(0);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::vector<VariantResult> results;
  for (const auto& variant : experiment.variants) {
    results.push_back(run_variant(experiment, variant));
  }
  if (is_secondary_process()) return "";
  const fs::path dir = experiment.output_dir / experiment.name;
  std::vector<VariantOutputs> outputs;
  for (const auto& r : results) {
    VariantOutputs none;  // do_train = false: no metrics.jsonl
    none.dir = r.dir;
    outputs.push_back(is_variant_dir(r.dir) ? read_variant_outputs(r.dir) : none);
  }
  return write_comparison(dir, experiment, results, outputs);
}

}  // namespace bertlab
