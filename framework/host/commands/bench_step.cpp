// `bertlab bench step`: a BERT training step timed by phase.

#include "commands/bench_step.h"

#include <ATen/ATen.h>
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
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <thread>

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

// Random token ids, a full mask, two segments and random answer spans: one replica's batch.
Batch make_batch(const StepBenchOptions& o, int64_t rows, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  Batch b;
  b["input_ids"] = at::randint(o.vocab_size, {rows, o.seq}, gen, at::kLong);
  b["input_mask"] = at::ones({rows, o.seq}, at::kLong);
  at::Tensor segments = at::zeros({rows, o.seq}, at::kLong);
  segments.narrow(1, o.seq / 2, o.seq - o.seq / 2).fill_(1);
  b["segment_ids"] = segments;
  b["start_positions"] = at::randint(o.seq, {rows}, gen, at::kLong);
  b["end_positions"] = at::randint(o.seq, {rows}, gen, at::kLong);
  return b;
}

struct Phases {
  std::vector<double> step, forward, backward, comm, optimizer;
  int64_t dense_bytes = 0;  // sent by rank 0 in the last step
  int64_t sparse_bytes = 0;
  OverlapStats overlap;  // rank 0's last step
};

}  // namespace

int bench_step(const PluginHost& host, const StepBenchOptions& o) {
  auto check = [](bool ok, const std::string& message) {
    if (!ok) throw ConfigError("bench step: " + message);
  };
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
  PrecisionOptions precision;
  precision.precision = o.precision;
  if (device.is_cuda()) set_tf32(o.tf32);

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

  const Component& task_c = component(host, ComponentKind::kTask, o.task);
  const Component& strategy_c = component(host, ComponentKind::kStrategy, o.strategy);
  const Component& optimizer_c = component(host, ComponentKind::kOptimizer, o.optimizer);
  std::unique_ptr<Task> task = task_c.task_factory(ConfigView("task", task_c.spec.options, {}));
  // The strategy's defaults, and what the flags set.
  std::map<std::string, OptionValue> strategy_values;
  auto declares = [&](const std::string& key) {
    return std::any_of(strategy_c.spec.options.begin(), strategy_c.spec.options.end(),
                       [&](const OptionDecl& d) { return d.key == key; });
  };
  if (o.overlap_backward) {
    check(declares("overlap_backward"),
          fmt::format("--overlap-backward: the {} strategy has no overlap_backward option; use "
                      "mirrored or sparse_allgather",
                      o.strategy));
    strategy_values["overlap_backward"] = true;
  }
  if (o.bucket_mb > 0) {
    check(declares("bucket_mb"),
          fmt::format("--bucket-mb: the {} strategy has no bucket_mb option", o.strategy));
    strategy_values["bucket_mb"] = o.bucket_mb;
  }
  const ConfigView strategy_view("strategy", strategy_c.spec.options, strategy_values);
  set_compute_threads(o.threads);

  const int world = o.replicas;
  const int64_t rows = o.batch / world;
  std::vector<std::shared_ptr<torch::nn::Module>> models;
  for (int r = 0; r < world; ++r) {
    at::manual_seed(12345);
    models.push_back(task->create_model(config, o.sparse_embeddings));
    models.back()->to(device);
  }
  Phases phases;  // rank 0's

  auto run_rank = [&](int rank, Communicator& comm) {
    torch::nn::Module& model = *models[static_cast<size_t>(rank)];
    std::unique_ptr<Strategy> strategy = strategy_c.strategy_factory(strategy_view);
    std::unique_ptr<Optimizer> optimizer =
        optimizer_c.optimizer_factory(ConfigView("optimizer", optimizer_c.spec.options, {}));
    std::vector<NamedTensor> parameters;
    for (const auto& item : model.named_parameters(true)) {
      parameters.push_back({item.key(), item.value()});
    }
    optimizer->init(parameters, OptimizerContext{o.steps + 1});
    std::unique_ptr<OverlapReducer> overlap;
    if (world > 1 && strategy->overlap_bucket_mb() > 0) {
      overlap = std::make_unique<OverlapReducer>(model, comm, strategy->overlap_bucket_mb());
    }
    Batch batch = make_batch(o, rows, 1000 + static_cast<uint64_t>(rank));
    for (auto& [name, t] : batch) t = t.to(device);
    // Phase boundaries wait for the device (a no-op on CPU), so each phase is its own time.
    const at::Tensor probe = parameters.front().tensor;
    auto sync = [&] {
      if (device.is_cuda()) (void)probe.flatten()[0].item<float>();
    };
    model.train();
    for (int step = 0; step <= o.steps; ++step) {  // step 0 warms up
      sync();
      const auto t0 = Clock::now();
      model.zero_grad(/*set_to_none=*/true);
      comm.reset_traffic();
      LossOutput out;
      {
        AutocastScope autocast(precision.autocast_dtype(), device);
        std::optional<PerExampleDropoutScope> masks;
        if (o.dropout_rng == "per_example")
          masks.emplace(DropoutKey{12345, step, rank * rows, rows});
        out = task->compute_loss(model, batch);
      }
      sync();
      const auto t1 = Clock::now();
      if (overlap) overlap->arm();
      out.loss.backward();
      GradientSet grads = GradientSet::from_module(model);
      sync();
      const auto t2 = Clock::now();
      // The communication phase is what backward left to wait for.
      OverlapStats overlap_stats;
      if (overlap) {
        overlap_stats = overlap->finish();
        overlap->mark_averaged(grads);
      }
      strategy->reduce_gradients(grads, comm);
      sync();
      const auto t3 = Clock::now();
      optimizer->step(grads, step);
      sync();
      const auto t4 = Clock::now();
      if (rank == 0 && step > 0) {
        phases.step.push_back(seconds(t0, t4));
        phases.forward.push_back(seconds(t0, t1));
        phases.backward.push_back(seconds(t1, t2));
        phases.comm.push_back(seconds(t2, t3));
        phases.optimizer.push_back(seconds(t3, t4));
        phases.dense_bytes = comm.traffic_bytes(Traffic::kDense);
        phases.sparse_bytes = comm.traffic_bytes(Traffic::kSparse);
        phases.overlap = overlap_stats;
      }
    }
  };
  // As in training: thread ranks, each drawing its dropout from its own generator.
  run_thread_ranks(world, std::chrono::seconds(600), device, run_rank);

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
  j["hidden_size"] = o.hidden_size;
  j["num_hidden_layers"] = o.num_hidden_layers;
  j["num_attention_heads"] = o.num_attention_heads;
  j["intermediate_size"] = o.intermediate_size;
  j["vocab_size"] = o.vocab_size;
  j["batch"] = o.batch;
  j["seq"] = o.seq;
  j["threads"] = o.threads;
  j["strategy"] = o.strategy;
  j["replicas"] = o.replicas;
  j["sparse_embeddings"] = o.sparse_embeddings;
  j["overlap_backward"] = o.overlap_backward;
  if (declares("bucket_mb")) {
    j["bucket_mb"] = strategy_view.get_float("bucket_mb");
  }
  j["steps"] = o.steps;
  j["step_s"] = step_s;
  j["device"] = device.str();
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
  if (o.overlap_backward) {
    j["overlap_buckets"] = phases.overlap.buckets;
    j["overlap_buckets_in_backward"] = phases.overlap.buckets_in_backward;
  }
  j["encoder_gflop_per_step"] = flops / 1e9;
  j["achieved_gflops"] = flops / step_s / 1e9;
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace bertlab
