// Runs each variant of a resolved experiment — its data, models, initial weights, training,
// evaluation and output files — and then the comparison of them all.

#include "train/runner.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/io/checkpoint.h>
#include <bertlab/io/safetensors.h>
#include <bertlab/log.h>
#include <bertlab/model/init_checkpoint.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "report/compare.h"
#include "report/hf_export.h"
#include "report/report.h"
#include "report/run_outputs.h"
#include "report/tensorboard.h"
#include "runtime/process_rank.h"
#include "runtime/threads.h"
#include "train/precision.h"
#include "train/run_lock.h"
#include "train/run_options.h"
#include "train/stop_signal.h"
#include "train/train_checkpoint.h"
#include "train/train_loop.h"
#include "train/ulp_perturbation.h"

namespace bertlab {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

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
                           const RunOptions& options, const VariantResult& result,
                           double start_time) {
  RunSummary summary;
  summary.experiment = experiment.name;
  summary.experiment_file = experiment.file.string();
  summary.reference = experiment.reference;
  summary.variant = variant.name;
  summary.seed = variant.repeat_seed;
  summary.config_hash = run_config_hash(variant);
  summary.init_checkpoint = options.init_checkpoint.string();
  if (variant.init_from) summary.init_from = variant.init_from->label();
  summary.steps = result.steps;
  summary.final_loss = result.final_loss;
  summary.examples_per_second = result.examples_per_second;
  summary.wall_time_s = result.wall_time_s;
  summary.start_time = start_time;
  write_file_atomic(result.dir / "run_summary.json", summary_json(summary));
  if (!options.tensorboard || !is_variant_dir(result.dir)) return;
  const VariantOutputs outputs = read_variant_outputs(result.dir);
  const fs::path events =
      write_event_file(result.dir, start_time, variant_events(outputs, start_time));
  log_info("train", "variant '{}': TensorBoard events {}", variant.name, events.string());
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
void init_models_from_checkpoint(const ResolvedVariant& variant, const RunOptions& options,
                                 const std::vector<std::shared_ptr<torch::nn::Module>>& models,
                                 const std::optional<fs::path>& report_dir) {
  const fs::path& path = options.init_checkpoint;
  Checkpoint checkpoint;
  try {
    checkpoint = read_checkpoint(path);
  } catch (const DataError& e) {
    throw DataError(fmt::format("[model] init_checkpoint: {}", e.what()));
  }
  InitReport report;
  for (const auto& model : models) {
    report = init_from_checkpoint(*model, checkpoint, variant.bert_config,
                                  options.init_checkpoint_exclude);
  }
  log_info("model", "variant '{}': init_checkpoint {}", variant.name, report.summary());
  if (report_dir) write_file_atomic(*report_dir / "init_report.json", report.to_json());
}

/// [model] init_from: the run it starts from finished, with the configuration it was resolved
/// with (a run of another configuration made other weights).
void check_init_from(const ResolvedVariant& variant) {
  const InitFrom& from = *variant.init_from;
  const fs::path summary_file = from.checkpoint.parent_path() / "run_summary.json";
  std::error_code ec;
  BERTLAB_CHECK_AS(
      DataError, fs::is_regular_file(from.checkpoint, ec) && fs::is_regular_file(summary_file, ec),
      "variant '{}' starts from the final weights of '{}' ([model] init_from), and "
      "{} is not there: that run has not finished; run it first (`bertlab run` of "
      "the experiment runs it before; with --variant, select it too)",
      variant.name, from.label(), from.checkpoint.string());
  std::ifstream in(summary_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const RunSummary summary = parse_summary(text, summary_file.string());
  BERTLAB_CHECK_AS(DataError, summary.config_hash == from.config_hash,
                   "variant '{}' starts from the final weights of '{}' ([model] init_from), and "
                   "{} was made by another configuration of it (config_hash {}, now {}); run it "
                   "again first (`bertlab run` of the experiment with both selected)",
                   variant.name, from.label(), from.checkpoint.string(), summary.config_hash,
                   from.config_hash);
}

/// launcher = "env": this process's rank from torchrun's or Slurm's variables, checked against
/// the variant's replicas; nullopt for thread ranks.
std::optional<ProcessRank> launched_process(const ResolvedVariant& variant,
                                            const RunOptions& options) {
  if (!options.env_launcher) return std::nullopt;
  std::optional<ProcessRank> process = process_rank_from_env();
  const int n = options.replicas;
  if (!process) {
    throw ConfigError(fmt::format(
        "strategy.launcher: variant '{}' uses launcher = \"env\", but RANK and WORLD_SIZE are "
        "not set (nor Slurm's SLURM_PROCID and SLURM_NTASKS); start its {} ranks with "
        "`bertlab launch --nproc {} -- bertlab ...`, `torchrun --nproc-per-node {} --no-python "
        "bertlab ...` or `srun -n {} bertlab ...` (docs/distributed.md)",
        variant.name, n, n, n, n));
  }
  if (process->world_size != n) {
    throw ConfigError(fmt::format(
        "strategy.replicas: variant '{}' declares {} replicas but WORLD_SIZE is {}; make them "
        "equal",
        variant.name, n, process->world_size));
  }
  return process;
}

/// Training steps: num_train_steps, or as run_classifier.py int(examples / batch × epochs).
int64_t count_train_steps(const ResolvedVariant& variant, const RunOptions& o, const Task& task,
                          int64_t batch_size) {
  const int64_t num_examples = task.num_train_examples();
  int64_t steps = o.num_train_steps;
  if (steps == 0) {
    steps = static_cast<int64_t>(static_cast<double>(num_examples) /
                                 static_cast<double>(batch_size) * o.num_train_epochs);
  }
  if (o.do_train && steps <= 0 && task.streams_train_data()) {
    throw ConfigError(fmt::format(
        "train.num_train_steps: task {} streams its training data (its size is not known "
        "before reading it), so set train.num_train_steps, as run_pretraining.py needs",
        variant.task.plugin));
  }
  if (o.do_train && steps <= 0) {
    throw ConfigError(fmt::format(
        "train.num_train_epochs: {} training examples, train_batch_size {} and {} epochs give 0 "
        "steps; lower train_batch_size or set train.num_train_steps",
        num_examples, batch_size, o.num_train_epochs));
  }
  return steps;
}

/// One model per replica of this process, identically initialized from the seed (each replica
/// draws the same sequence from the freshly seeded generator).
std::vector<std::shared_ptr<torch::nn::Module>> make_models(const ResolvedVariant& variant,
                                                            const RunOptions& o, const Task& task,
                                                            int replicas, c10::Device device) {
  std::vector<std::shared_ptr<torch::nn::Module>> models;
  for (int r = 0; r < replicas; ++r) {
    at::manual_seed(o.seed);
    models.push_back(task.create_model(variant.bert_config, o.sparse_embeddings));
    models.back()->to(device);
  }
  return models;
}

/// Initial weights: this variant's newest resumable checkpoint when resuming (every rank reads
/// it; only rank 0 writes them), else [model] init_checkpoint. Returns the checkpoint resumed.
std::optional<TrainCheckpoint> load_initial_weights(
    const ResolvedVariant& variant, const RunOptions& o,
    const std::vector<std::shared_ptr<torch::nn::Module>>& models, const fs::path& dir, bool files,
    bool resume) {
  std::optional<TrainCheckpoint> ckpt;
  if (resume) ckpt = find_resume_checkpoint(variant, dir / "checkpoints");
  if (ckpt) {
    for (const auto& m : models) load_parameters(*m, ckpt->model, ckpt->dir / "model.safetensors");
    if (ckpt->state.rng_state.defined()) {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(ckpt->state.rng_state);
    }
  } else if (!o.init_checkpoint.empty()) {
    if (variant.init_from) check_init_from(variant);
    init_models_from_checkpoint(variant, o, models,
                                files ? std::optional<fs::path>(dir) : std::nullopt);
  }
  return ckpt;
}

/// Trains the variant's ranks of this process: its thread ranks, or its one launched rank.
TrainOutcome train_variant(const ResolvedExperiment& experiment, const TrainLoop& loop,
                           const std::vector<std::shared_ptr<torch::nn::Module>>& models,
                           const std::optional<ProcessRank>& process) {
  const RunOptions& o = *loop.options;
  const int64_t accumulation = o.gradient_accumulation_steps;
  const std::string micro_batches =
      accumulation > 1 ? fmt::format(" in {} micro-batches", accumulation) : "";
  // Replicas of this step: threads of this process, or the launched processes.
  const int64_t ranks = process ? process->world_size : static_cast<int64_t>(models.size());
  if (loop.task->streams_train_data()) {
    log_info("train", "streamed examples, batch {} over {} replica(s){}, {} steps", loop.batch_size,
             ranks, micro_batches, loop.num_train_steps);
  } else {
    const int64_t n = loop.task->num_train_examples();
    log_info("train", "{} examples, batch {} over {} replica(s){}, {} steps ({} per epoch)", n,
             loop.batch_size, ranks, micro_batches, loop.num_train_steps, n / loop.batch_size);
  }
  if (process) {
    return train_process_rank(loop, *models.front(), *process,
                              experiment.name + "/" + loop.variant->name);
  }
  return train_replicas(loop, models);
}

/// Evaluation (eval_results.json, the task's floor.json), the final weights (model.safetensors) and
/// the summary.
void finish_variant(const ResolvedVariant& variant, const RunOptions& o, Task& task,
                    torch::nn::Module& model, c10::Device device, bool files,
                    VariantResult& result) {
  if (files && o.do_eval) {
    model.eval();
    EvalContext eval_ctx{device, o.eval_batch_size, result.dir};
    AutocastScope autocast(o.precision.autocast_dtype(), device);
    result.eval_metrics = task.evaluate(model, eval_ctx);
    write_file_atomic(result.dir / "eval_results.json",
                      metrics_json(result.eval_metrics, result.steps));
    result.floor = task.floor_metrics();
    if (!result.floor.name.empty()) {
      write_file_atomic(result.dir / "floor.json", floor_json(result.floor));
    }
    std::string summary;
    for (const auto& [name, value] : result.eval_metrics) {
      summary += fmt::format(" {} {:.4f}", name, value);
    }
    log_info("eval", "variant '{}':{}", variant.name, summary);
  }
  result.final_parameters = snapshot_parameters(model);
  if (!files) return;
  NamedTensors weights(result.final_parameters.begin(), result.final_parameters.end());
  std::map<std::string, std::string> metadata =
      hf_export_metadata(task.hf_model_head(), o.vocab_file, o.do_lower_case);
  metadata.insert({{"format", "pt"},
                   {"bertlab_variant", variant.name},
                   {"global_step", std::to_string(result.steps)},
                   {"bert_config", variant.bert_config.to_json()}});
  write_safetensors(result.dir / "model.safetensors", weights, metadata);
  if (o.export_hf) {
    const HfExportResult exported = export_hf({result.dir, result.dir / "hf", std::nullopt});
    log_info("export", "variant '{}': {} in {} ({} tensors)", variant.name, exported.architecture,
             (result.dir / "hf").string(), exported.tensors);
  }
}

}  // namespace

VariantResult run_variant(const ResolvedExperiment& experiment, const ResolvedVariant& variant,
                          const RunHooks& hooks) {
  const RunOptions o = RunOptions::from_variant(variant);
  // In a launched run only rank 0's process writes files.
  const bool files = hooks.max_steps == 0 && !is_secondary_process();
  const std::optional<ProcessRank> process = launched_process(variant, o);
  const auto start = Clock::now();
  const double start_time = unix_time_now();
  VariantResult result;
  result.name = variant.name;
  result.seed = variant.repeat_seed;
  result.dir = experiment.output_dir / experiment.name / variant.run_folder();
  // Held until this variant is done: a second bertlab on the same folder stops before writing.
  std::optional<RunFolderLock> lock;
  if (files) {
    lock.emplace(result.dir, fmt::format("variant '{}' of {}", variant.name, experiment.name));
    write_file_atomic(result.dir / "resolved.toml", variant.resolved_toml);
  }
  const int threads = o.threads != 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Thread ranks share this process's cores; a launched rank shares its machine's.
  const int sharing = process ? process->local_world_size : o.replicas;
  set_compute_threads(std::max<int>(1, threads / sharing));
  const c10::Device device = resolve_device(o.device, process);
  log_info(
      "train",
      "variant '{}'{}: task {}, strategy {}, optimizer {}, {} thread(s), device {}, precision {}",
      variant.name,
      variant.repeat_seed ? fmt::format(" (seed {})", *variant.repeat_seed) : std::string(),
      variant.task.plugin, variant.strategy.plugin, variant.optimizer.plugin, threads, device.str(),
      o.precision.precision);
  if (device.is_cuda()) set_tf32(o.precision.allow_tf32);

  FullTokenizer tokenizer(o.vocab_file, o.do_lower_case);
  std::unique_ptr<Task> task = variant.task.component->task_factory(variant.task.options);
  task->prepare(TaskContext{&variant.bert_config, &tokenizer, o.seed, result.dir});
  // Thread ranks: one model per replica here. Process ranks: this process's one.
  const auto models = make_models(variant, o, *task, process ? 1 : o.replicas, device);
  const std::optional<TrainCheckpoint> resume =
      load_initial_weights(variant, o, models, result.dir, files, hooks.max_steps == 0 && o.resume);
  if (hooks.perturb_ulp_seed) perturb_by_one_ulp(models, *hooks.perturb_ulp_seed);

  TrainLoop loop;
  loop.variant = &variant;
  loop.options = &o;
  loop.task = task.get();
  loop.device = device;
  // Examples per optimizer step: k micro-batches of train_batch_size.
  loop.batch_size = o.train_batch_size * o.gradient_accumulation_steps;
  loop.num_train_steps = count_train_steps(variant, o, *task, loop.batch_size);
  // gradcheck stops after its steps; a run trains every step, on every rank (a launched run's
  // secondary processes write no files but train as long as rank 0).
  loop.stop_after =
      hooks.max_steps > 0 ? std::min(loop.num_train_steps, hooks.max_steps) : loop.num_train_steps;
  loop.dir = result.dir;
  loop.start = start;
  loop.write_files = files;
  loop.checkpoints = hooks.max_steps == 0;
  loop.hooks = &hooks;
  loop.resume = resume ? &*resume : nullptr;
  TrainOutcome outcome;
  if (o.do_train) outcome = train_variant(experiment, loop, models, process);
  result.final_loss = outcome.final_loss;
  result.steps = outcome.steps;
  result.examples_per_second =
      outcome.train_seconds > 0
          ? static_cast<double>(outcome.steps * loop.batch_size) / outcome.train_seconds
          : 0.0;
  finish_variant(variant, o, *task, *models.front(), device, files, result);
  result.wall_time_s = seconds_since(start);
  if (files) write_variant_summary(experiment, variant, o, result, start_time);
  log_info("train", "variant '{}' done in {:.1f} s, {:.1f} examples/s; outputs in {}", variant.name,
           result.wall_time_s, result.examples_per_second, result.dir.string());
  return result;
}

std::optional<VariantResult> finished_run(const ResolvedExperiment& experiment,
                                          const ResolvedVariant& variant) {
  // A launched rank cannot know that every other rank sees the same folder: those always run.
  const RunOptions o = RunOptions::from_variant(variant);
  const fs::path dir = experiment.output_dir / experiment.name / variant.run_folder();
  // Finished: the files a run writes last are all there (a run stopped or killed has no
  // summary; one whose outputs were removed since runs again).
  std::error_code ec;
  if (!fs::is_regular_file(dir / "run_summary.json", ec) || !is_variant_dir(dir) ||
      !fs::is_regular_file(dir / "model.safetensors", ec) ||
      (o.do_eval && !fs::is_regular_file(dir / "eval_results.json", ec))) {
    return std::nullopt;
  }
  VariantOutputs outputs = read_variant_outputs(dir);
  if (outputs.summary.config_hash != run_config_hash(variant)) return std::nullopt;
  log_info("train",
           "variant '{}'{}: finished before with the same configuration in {}; skipped "
           "(--rerun runs it again)",
           variant.name,
           variant.repeat_seed ? fmt::format(" (seed {})", *variant.repeat_seed) : std::string(),
           dir.string());
  VariantResult result = result_from_outputs(outputs, variant.name);
  result.seed = variant.repeat_seed;
  return result;
}

std::string run_experiment(const ResolvedExperiment& experiment, const PluginHost& host,
                           const RunExperimentOptions& options) {
  (void)host;
  // From here on SIGINT and SIGTERM stop training after the current step, with a checkpoint.
  install_stop_handlers();
  std::vector<VariantResult> results;
  for (const auto& variant : experiment.variants) {
    // A launched rank cannot know that every other rank sees the same folder: those always run.
    const bool may_skip = !options.rerun && !RunOptions::from_variant(variant).env_launcher;
    std::optional<VariantResult> done = may_skip ? finished_run(experiment, variant) : std::nullopt;
    results.push_back(done ? std::move(*done) : run_variant(experiment, variant));
  }
  if (is_secondary_process() || !options.comparison) return "";
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
