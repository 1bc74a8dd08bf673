#pragma once
// Resumable training state ([train] save_checkpoints_steps, --resume):
//
//   VARIANT/checkpoints/step-000300/model.safetensors      the parameters (bertlab names)
//   VARIANT/checkpoints/step-000300/optimizer.safetensors  the whole optimizer state (zero1's
//                                                          shards gathered)
//   VARIANT/checkpoints/step-000300/ranks.safetensors      every rank's strategy state (and, for
//                                                          local SGD, its parameters and
//                                                          optimizer state); when there is any
//   VARIANT/checkpoints/step-000300/state.json             step, logging window, RNG state
//   VARIANT/checkpoints/step-000300/metrics.jsonl          metrics.jsonl up to this step
//   VARIANT/checkpoints/step-000300/resolved.toml          the configuration that wrote it
//
// A checkpoint is written into a temporary folder and renamed into place, so an interrupted
// write never replaces or damages the previous one.

#include <bertlab/io/safetensors.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace bertlab {

class Optimizer;

/// The training loop's state after `step` optimizer steps, besides the tensors.
struct TrainState {
  int64_t step = 0;          ///< optimizer steps done; the batch order resumes after them
  double window_loss = 0.0;  ///< sum of step losses in the open logging window
  int64_t window_steps = 0;  ///< steps in the open logging window
  /// The open window's steps including skipped ones, and its collective payload so far (the
  /// means in its metrics.jsonl line cover the whole window after a resume).
  int64_t window_all = 0;
  int64_t window_dense_bytes = 0, window_sparse_bytes = 0;
  int64_t skipped_steps = 0;   ///< updates skipped for a non-finite loss or gradient
  double final_loss = 0.0;     ///< the last logged mean loss
  double train_seconds = 0.0;  ///< training time spent before this checkpoint
  std::string metrics_lines;   ///< metrics.jsonl lines logged up to `step`
  at::Tensor rng_state;        ///< libtorch's default CPU generator (dropout), uint8
  std::string data_position;   ///< a streaming task's TrainStream::position(); else empty
  double loss_scale = 1.0;     ///< the dynamic loss scale ([train] loss_scaling)
  int64_t loss_scale_growth_tracker = 0;  ///< finite steps since the scale last changed
  NamedTensors rank_state;  ///< train/rank_state.h: rank<R>/strategy|model|optimizer/NAME
};

/// A checkpoint read back.
struct TrainCheckpoint {
  std::filesystem::path dir;
  TrainState state;
  NamedTensors model;
  NamedTensors optimizer;
  std::string resolved_toml;
};

/// VARIANT/checkpoints/step-NNNNNN.
std::filesystem::path train_checkpoint_dir(const std::filesystem::path& root, int64_t step);

/// section.key → value as TOML text, from a resolved.toml (`what` names it in errors).
std::map<std::string, std::string> flatten_resolved_toml(const std::string& toml_text,
                                                         const std::string& what);

/// Writes the checkpoint of `state` under `root` (VARIANT/checkpoints) atomically, then deletes
/// the oldest ones beyond `keep_max` (0 keeps all).
void save_train_checkpoint(const std::filesystem::path& root, const TrainState& state,
                           const torch::nn::Module& model, const NamedTensors& optimizer_state,
                           const std::string& resolved_toml, int64_t keep_max);

/// The complete checkpoints under `root`, oldest first (half-written temporary folders are not
/// listed).
std::vector<std::filesystem::path> list_train_checkpoints(const std::filesystem::path& root);

/// Reads the checkpoint in `dir`. Throws DataError naming the file that is missing or corrupt.
TrainCheckpoint load_train_checkpoint(const std::filesystem::path& dir);

/// Compares the configuration a checkpoint was written with and the current one. Throws
/// ConfigError listing every change that makes resuming meaningless (model shape, batch size,
/// replicas, seed, task or optimizer plugin); returns the other changes, one line each.
std::vector<std::string> compare_resume_config(const std::string& saved_toml,
                                               const std::string& current_toml,
                                               const std::filesystem::path& dir);

}  // namespace bertlab
