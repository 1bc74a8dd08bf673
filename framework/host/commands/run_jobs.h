#pragma once
// `bertlab run --jobs N`: an experiment's runs (variant × seed) as separate `bertlab run`
// processes, N at a time on this machine, then the comparison of them all.

#include <optional>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "config/experiment.h"

namespace bertlab {

/// The GPUs `bertlab run --jobs` hands out: each run of a CUDA variant gets devices of its own,
/// named to it by CUDA_VISIBLE_DEVICES, so runs never share a GPU.
class GpuPool {
 public:
  /// `ids`: the devices as CUDA_VISIBLE_DEVICES names them (indices or UUIDs).
  explicit GpuPool(std::vector<std::string> ids);
  /// The devices this process sees: CUDA_VISIBLE_DEVICES's entries when it is set, else
  /// 0 … (CUDA device count − 1) (none in a CPU build).
  static GpuPool visible();

  size_t size() const { return all_.size(); }
  size_t free() const { return free_.size(); }
  /// The first `n` free devices, now taken; nullopt when fewer are free (n = 0: none needed).
  std::optional<std::vector<std::string>> take(size_t n);
  /// Devices a finished run held.
  void give_back(const std::vector<std::string>& ids);

 private:
  std::vector<std::string> all_;
  std::vector<std::string> free_;  // in the order of all_
};

/// The GPUs one run of `variant` takes: one per process rank (launcher = "env": LOCAL_RANK picks
/// its device), one for thread ranks (they share device 0 of what they see), none on the CPU.
int gpus_for(const ResolvedVariant& variant);

/// What the parent passes on to each run's process.
struct JobsOptions {
  int jobs = 2;                   ///< runs at the same time
  bool rerun = false;             ///< also runs that finished before with the same configuration
  std::string file;               ///< the experiment file, as given
  std::vector<std::string> sets;  ///< --set arguments, passed to every run
  std::string output_dir;         ///< --output-dir, or "" for [experiment] output_dir
  PluginOptions plugins;          ///< --plugin-dir, --allow-insecure-plugins
};

/// Runs every run of `experiment` that has not finished before (unless options.rerun) in its own
/// process, options.jobs at a time: `bertlab run FILE --variant V [--run-seed S] --no-comparison`
/// with the same --set, --output-dir and plugin options; [experiment] threads, when the file
/// does not set it, so that the runs share the cores; --resume when the run's folder holds
/// checkpoints of an interrupted run. Their output is printed line by line after `[RUN] `, with a
/// progress line as each run ends. SIGINT or SIGTERM stops every run after its current step
/// (with a checkpoint) and starts no more. Then writes the comparison of every finished run
/// into `*table` (Markdown). Returns 0, 1 when a run failed, or 128 + the signal.
int run_in_processes(const ResolvedExperiment& experiment, const JobsOptions& options,
                     std::string* table);

}  // namespace bertlab
