#pragma once
// The host's keys of one variant as the training engine uses them, read once, typed: nothing
// below run_variant looks a key up by its name.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "config/host_options.h"
#include "train/precision.h"

namespace bertlab {

struct RunOptions {
  // [experiment]
  uint64_t seed = 0;
  int threads = 1;  ///< 0: one per core
  bool tensorboard = false;
  bool export_hf = false;  ///< VARIANT/hf/ after the final weights

  // [model] (the host's keys; BERT's own are in ResolvedVariant::bert_config)
  std::filesystem::path vocab_file;
  bool do_lower_case = true;
  bool sparse_embeddings = false;
  bool per_example_dropout = true;  ///< dropout_rng = "per_example"
  std::filesystem::path init_checkpoint;
  std::vector<std::string> init_checkpoint_exclude;  ///< the comma-separated list, trimmed

  // [strategy] (the host's keys)
  int replicas = 1;
  bool env_launcher = false;  ///< launcher = "env": this process is one rank
  std::string backend = "auto";
  std::string device = "cpu";
  double timeout_s = 300;
  int64_t check_every_steps = 100;
  bool global_loss_normalization = true;  ///< loss_normalization = "global"

  // [train]
  bool do_train = true;
  bool do_eval = true;
  bool resume = false;
  int64_t train_batch_size = 32;  ///< examples per micro-batch
  int64_t gradient_accumulation_steps = 1;
  int64_t eval_batch_size = 8;
  int64_t num_train_steps = 0;  ///< 0: from num_train_epochs
  double num_train_epochs = 3.0;
  int64_t log_every_steps = 10;
  int64_t eval_every_steps = 0;  ///< 0: no evaluation during training
  std::optional<StopWhen> stop_when;
  int64_t save_checkpoints_steps = 0;
  int64_t keep_checkpoint_max = 5;
  bool skip_nonfinite = false;  ///< on_nonfinite = "skip_step"
  PrecisionOptions precision;

  static RunOptions from_variant(const ResolvedVariant& variant);
};

}  // namespace bertlab
