#include "commands/run_jobs.h"

#include <bertlab/error.h>
#include <bertlab/log.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>

#include "comm/nccl_communicator.h"
#include "report/compare.h"
#include "report/report.h"
#include "runtime/child_process.h"
#include "train/run_options.h"
#include "train/runner.h"
#include "train/stop_signal.h"

namespace bertlab {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

/// One run of the experiment and, once started, its process.
struct Job {
  const ResolvedVariant* variant = nullptr;
  std::string label;  ///< "variant" or "variant seed S"
  std::optional<ChildProcess> child;
  Clock::time_point started;
  double seconds = 0;             ///< wall time, once done
  std::vector<std::string> gpus;  ///< the devices it holds while it runs
  const Job* after = nullptr;     ///< the run of this experiment it starts from (init_from)
  bool failed = false;            ///< it ran and failed, or was skipped for its dependency
  std::string skipped;            ///< why it did not start: the run it starts from failed
};

std::string label_of(const ResolvedVariant& v) {
  return v.repeat_seed ? fmt::format("{} seed {}", v.name, *v.repeat_seed) : v.name;
}

/// Whether the run's folder holds checkpoints (of an interrupted run: it has no summary).
bool has_checkpoints(const fs::path& dir) {
  std::error_code ec;
  const fs::path checkpoints = dir / "checkpoints";
  return fs::is_directory(checkpoints, ec) && !fs::is_empty(checkpoints, ec);
}

std::vector<std::string> run_command(const ResolvedExperiment& experiment, const ResolvedVariant& v,
                                     const JobsOptions& o, int threads_per_run) {
  std::vector<std::string> c;
  // A variant of process ranks (launcher = "env") runs under `bertlab launch`, one per rank.
  const RunOptions run = RunOptions::from_variant(v);
  if (run.env_launcher) {
    c = {self_executable(), "launch", "--nproc", std::to_string(run.replicas), "--"};
  }
  c.insert(c.end(),
           {self_executable(), "run", o.file, "--variant", v.name, "--rerun", "--no-comparison"});
  if (v.repeat_seed) c.insert(c.end(), {"--run-seed", std::to_string(*v.repeat_seed)});
  for (const auto& s : o.sets) c.insert(c.end(), {"--set", s});
  // The file's threads win; otherwise the runs share the cores.
  if (!v.experiment.has("threads") && v.experiment.get_int("threads") != threads_per_run) {
    c.insert(c.end(), {"--set", fmt::format("experiment.threads={}", threads_per_run)});
  }
  if (!o.output_dir.empty()) c.insert(c.end(), {"--output-dir", o.output_dir});
  if (!o.rerun && has_checkpoints(experiment.output_dir / experiment.name / v.run_folder())) {
    c.push_back("--resume");
  }
  for (const auto& d : o.plugins.plugin_dirs) c.insert(c.end(), {"--plugin-dir", d});
  if (o.plugins.allow_insecure) c.push_back("--allow-insecure-plugins");
  return c;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

/// Whether `job` may start: the run it starts from finished here (or is not run here). A job
/// whose dependency failed leaves the queue, skipped, with the reason in `skipped`.
bool ready(Job& job, std::vector<Job*>& skipped) {
  if (job.after == nullptr) return true;
  if (job.after->failed) {
    job.failed = true;
    job.skipped =
        fmt::format("not started: it starts from '{}' ([model] init_from), which {}",
                    job.after->label, job.after->skipped.empty() ? "failed" : "did not start");
    log_line(LogLevel::kError, "jobs", fmt::format("'{}' {}", job.label, job.skipped));
    skipped.push_back(&job);
    return false;
  }
  return job.after->child && job.after->child->done;
}

/// Starts queued jobs, in order, until `jobs` run at once or the next one's GPUs are not free
/// (none once a stop was asked for); a job waits for the run it starts from, one whose
/// dependency failed is skipped (into `skipped`).
void start_jobs(std::deque<Job*>& queue, std::vector<Job*>& running, std::vector<Job*>& skipped,
                int jobs, GpuPool& gpus, const ResolvedExperiment& experiment, const JobsOptions& o,
                int threads_per_run) {
  for (auto it = queue.begin(); it != queue.end() && static_cast<int>(running.size()) < jobs &&
                                stop_signal_received() == 0;) {
    Job* job = *it;
    if (!ready(*job, skipped)) {
      it = job->failed ? queue.erase(it) : std::next(it);
      continue;
    }
    auto devices = gpus.take(static_cast<size_t>(gpus_for(*job->variant)));
    if (!devices) return;  // it waits for a run to give its GPUs back
    it = queue.erase(it);
    job->gpus = std::move(*devices);
    std::vector<std::pair<std::string, std::string>> env;
    if (!job->gpus.empty()) {
      env.emplace_back("CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(job->gpus, ",")));
    }
    job->child =
        start_child(run_command(experiment, *job->variant, o, threads_per_run), env, "run --jobs");
    job->started = Clock::now();
    running.push_back(job);
  }
}

/// How many runs are done, and the `[jobs]` line after each.
struct Progress {
  size_t total = 0;
  int jobs = 1;
  size_t done = 0;
  double done_seconds = 0;

  /// `job` has ended (reaped): counted, into `failed` when it failed, and logged.
  void finished(Job& job, std::vector<Job*>& failed) {
    job.seconds = std::chrono::duration<double>(Clock::now() - job.started).count();
    ++done;
    done_seconds += job.seconds;
    if (job.child->exit_code != 0) {
      job.failed = true;
      failed.push_back(&job);
    }
    const size_t left = total - done;
    const double eta = done_seconds / static_cast<double>(done) * static_cast<double>(left) /
                       std::min<double>(jobs, std::max<size_t>(left, 1));
    log_info("jobs", "{}/{} runs done{}: '{}' {} after {}{}", done, total,
             failed.empty() ? "" : fmt::format(" ({} failed)", failed.size()), job.label,
             job.child->exit_code == 0 ? "finished" : job.child->how, format_duration(job.seconds),
             left > 0 && stop_signal_received() == 0
                 ? fmt::format("; about {} to go", format_duration(eta))
                 : "");
  }
};

/// A run of init_from waits for the job of the run it starts from (none: finished before, or
/// not selected; the run checks its weights when it starts).
void link_dependencies(std::vector<Job>& jobs) {
  for (Job& j : jobs) {
    if (!j.variant->init_from) continue;
    for (const Job& d : jobs) {
      if (d.variant->name == j.variant->init_from->variant &&
          d.variant->repeat_seed == j.variant->init_from->seed) {
        j.after = &d;
      }
    }
  }
}

/// The comparison of every run that finished, now or before (`finished`: those skipped as
/// finished before, by variant); "" when none has.
std::string comparison_of_finished(const ResolvedExperiment& experiment,
                                   const std::vector<std::optional<VariantResult>>& finished) {
  std::vector<VariantResult> results;
  std::vector<VariantOutputs> outputs;
  for (size_t i = 0; i < experiment.variants.size(); ++i) {
    const ResolvedVariant& v = experiment.variants[i];
    const fs::path dir = experiment.output_dir / experiment.name / v.run_folder();
    if (!is_variant_dir(dir)) continue;
    outputs.push_back(read_variant_outputs(dir));
    VariantResult r = finished[i] ? *finished[i] : result_from_outputs(outputs.back(), v.name);
    r.seed = v.repeat_seed;
    results.push_back(std::move(r));
  }
  if (results.empty()) return "";
  return write_comparison(experiment.output_dir / experiment.name, experiment, results, outputs);
}

/// The GPUs the jobs share (none when no job runs on CUDA); a job that needs more than there
/// are is refused before anything starts.
GpuPool gpu_pool_for(const std::vector<Job>& jobs) {
  GpuPool gpus({});
  const bool cuda =
      std::any_of(jobs.begin(), jobs.end(), [](const Job& j) { return gpus_for(*j.variant) > 0; });
  if (cuda) gpus = GpuPool::visible();
  for (const Job& j : jobs) {
    const auto need = static_cast<size_t>(gpus_for(*j.variant));
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    BERTLAB_CHECK_AS(
        ConfigError, need <= gpus.size(),
        "run --jobs: '{}' needs {} GPU(s) of its own (device = cuda, one per "
        "process rank), and this machine shows {}{}; lower its replicas or run "
        "where there are more",
        j.label, need, gpus.size(),
        visible != nullptr ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible) : std::string());
  }
  if (cuda) log_info("jobs", "{} GPU(s): each CUDA run gets its own", gpus.size());
  return gpus;
}

}  // namespace

GpuPool::GpuPool(std::vector<std::string> ids) : all_(std::move(ids)), free_(all_) {}

GpuPool GpuPool::visible() {
  std::vector<std::string> ids;
  if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::stringstream list(env);
    std::string id;
    while (std::getline(list, id, ',')) {
      id.erase(0, id.find_first_not_of(' '));
      id.erase(id.find_last_not_of(' ') + 1);
      if (!id.empty()) ids.push_back(id);
    }
  } else {
    for (int d = 0; d < cuda_device_count(); ++d) ids.push_back(std::to_string(d));
  }
  return GpuPool(std::move(ids));
}

std::optional<std::vector<std::string>> GpuPool::take(size_t n) {
  if (n > free_.size()) return std::nullopt;
  std::vector<std::string> taken(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(n));
  free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(n));
  return taken;
}

void GpuPool::give_back(const std::vector<std::string>& ids) {
  // free_ stays in the order of all_: the lowest devices go first, run after run.
  std::vector<std::string> ordered;
  for (const auto& id : all_) {
    const bool returned = std::find(ids.begin(), ids.end(), id) != ids.end();
    if (returned || std::find(free_.begin(), free_.end(), id) != free_.end()) {
      ordered.push_back(id);
    }
  }
  free_ = std::move(ordered);
}

int gpus_for(const ResolvedVariant& variant) {
  const RunOptions o = RunOptions::from_variant(variant);
  if (o.device.rfind("cuda", 0) != 0) return 0;
  return o.env_launcher ? o.replicas : 1;
}

int run_in_processes(const ResolvedExperiment& experiment, const JobsOptions& options,
                     std::string* table) {
  BERTLAB_CHECK_AS(ConfigError, options.jobs >= 1, "run --jobs: must be >= 1, got {}",
                   options.jobs);
  install_stop_handlers();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads_per_run = std::max(1, cores / options.jobs);
  std::vector<Job> jobs;
  std::vector<std::optional<VariantResult>> finished(experiment.variants.size());
  for (size_t i = 0; i < experiment.variants.size(); ++i) {
    const ResolvedVariant& v = experiment.variants[i];
    if (!options.rerun) finished[i] = finished_run(experiment, v);
    if (!finished[i])
      jobs.push_back({&v, label_of(v), std::nullopt, {}, 0, {}, nullptr, false, {}});
  }
  link_dependencies(jobs);
  const size_t total = jobs.size();
  GpuPool gpus = gpu_pool_for(jobs);
  log_info("jobs", "{} run(s) to do, {} at a time, {} thread(s) each; {} finished before", total,
           options.jobs, threads_per_run, experiment.variants.size() - total);
  std::deque<Job*> queue;
  for (auto& j : jobs) queue.push_back(&j);
  std::vector<Job*> running;
  std::vector<Job*> failed;  // those that ran and failed, then those skipped for them
  Progress progress{total, options.jobs};
  bool forwarded = false;
  std::vector<Job*> skipped;
  start_jobs(queue, running, skipped, options.jobs, gpus, experiment, options, threads_per_run);
  while (!running.empty()) {
    if (stop_signal_received() != 0 && !forwarded) {
      forwarded = true;
      log_warning("jobs", "{}: stopping {} run(s) after their current step; {} not started",
                  signal_name(stop_signal_received()), running.size(), queue.size());
      for (Job* j : running) ::kill(-j->child->pid, stop_signal_received());
    }
    std::vector<pollfd> polls;
    polls.reserve(running.size());
    for (Job* j : running) polls.push_back({j->child->fd, POLLIN, 0});
    if (::poll(polls.data(), polls.size(), 250) < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("run --jobs: poll: {}", std::strerror(errno)));
    }
    for (size_t i = 0; i < polls.size(); ++i) {
      Job* job = running[i];
      if (polls[i].revents == 0 || forward_output(*job->child, "[" + job->label + "] ")) continue;
      reap(*job->child);
      gpus.give_back(job->gpus);
      progress.finished(*job, failed);
    }
    running.erase(
        std::remove_if(running.begin(), running.end(), [](const Job* j) { return j->child->done; }),
        running.end());
    start_jobs(queue, running, skipped, options.jobs, gpus, experiment, options, threads_per_run);
  }
  failed.insert(failed.end(), skipped.begin(), skipped.end());
  *table = comparison_of_finished(experiment, finished);
  if (stop_signal_received() != 0) return 128 + stop_signal_received();
  if (!failed.empty()) {
    std::vector<std::string> names;
    names.reserve(failed.size());
    for (const Job* j : failed) {
      names.push_back(
          fmt::format("'{}' {}", j->label, j->skipped.empty() ? j->child->how : j->skipped));
    }
    log_line(LogLevel::kError, "jobs",
             fmt::format("{} of {} run(s) failed: {}; their output is above, after their name",
                         failed.size(), total, fmt::join(names, ", ")));
    return 1;
  }
  return 0;
}

}  // namespace bertlab
