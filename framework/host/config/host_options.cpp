// Declarations of the host's own keys in each experiment section ([experiment], [train], ...).

#include "config/host_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace bertlab {

std::vector<OptionDecl> experiment_options() {
  return {
      string_option("name", "", "experiment name; outputs go to OUTPUT_DIR/NAME/VARIANT/")
          .mark_required(),
      string_option("description", "", "free text, copied to the comparison"),
      int_option("seed", 12345, "seed of initialization, dropout and the batch order").at_least(0),
      int_option("repeats", 1,
                 "runs of every variant, with seeds seed, seed+1, ...; or list them: seeds = "
                 "[1, 2, 3] (each run in VARIANT/seed-S/, compared by mean, CI and paired test)")
          .in_range(1, 1000),
      int_option("threads", 1,
                 "CPU threads for libtorch's and OpenBLAS's pools together; 0: one per core "
                 "(1 measured fastest on 2 cores, see README)")
          .in_range(0, 1024),
      string_option("output_dir", "runs",
                    "folder for results, relative to the current folder (as Google's "
                    "--output_dir); --output-dir overrides it"),
      bool_option("tensorboard", false,
                  "also write TensorBoard event files (events.out.tfevents.*) into each "
                  "variant's folder: `tensorboard --logdir OUTPUT_DIR/NAME`"),
      bool_option("export_hf", false,
                  "also write each variant as a Hugging Face model folder, VARIANT/hf/ (as "
                  "`bertlab export --hf`): transformers' from_pretrained opens it"),
  };
}

std::vector<OptionDecl> model_options() {
  return {
      path_option("bert_config_file", "Google's bert_config.json").mark_required(),
      path_option("vocab_file", "WordPiece vocabulary, one token per line").mark_required(),
      bool_option("do_lower_case", true, "lower-case and strip accents before WordPiece"),
      bool_option("sparse_embeddings", false,
                  "word-embedding gradient as sparse rows (indices + values)"),
      string_option("dropout_rng", "per_example",
                    "how dropout masks are drawn in training: per_example (a function of the "
                    "seed, the step, the example's place in the global batch and the site: the "
                    "same for any number of replicas, processes or micro-batches) or replica "
                    "(each replica its own generator, as DDP and Horovod)")
          .one_of({"per_example", "replica"}),
      checkpoint_option("init_checkpoint",
                        "initial weights: Google TF checkpoint (bert_model.ckpt), "
                        "pytorch_model.bin or .safetensors; empty: random initialization"),
      string_option("init_from", "",
                    "start from the final weights of another variant of this experiment (with "
                    "several seeds, its run of the same seed): it runs first, `run --jobs` and "
                    "`submit --slurm` wait for it, and its failure skips this one; empty: "
                    "init_checkpoint, or random initialization"),
      string_option("init_checkpoint_exclude", "",
                    "comma-separated name parts; matching parameters keep their random "
                    "initialization (e.g. classifier. for a head of another size)"),
  };
}

std::vector<OptionDecl> train_options() {
  return {
      int_option("train_batch_size", 32, "global batch, split evenly over the replicas")
          .at_least(1),
      int_option("eval_batch_size", 8, "batch size for evaluation").at_least(1),
      float_option("num_train_epochs", 3.0, "epochs over the training set").above(0),
      int_option("num_train_steps", 0,
                 "optimizer steps; 0: int(examples / train_batch_size * num_train_epochs)")
          .at_least(0),
      int_option("gradient_accumulation_steps", 1,
                 "micro-batches of train_batch_size per optimizer step; gradients summed and "
                 "scaled so the update is one step on the k-times larger batch")
          .at_least(1),
      int_option("log_every_steps", 10, "steps between lines of metrics.jsonl").at_least(1),
      int_option("eval_every_steps", 0,
                 "steps between evaluations during training, each a metrics.jsonl line of the "
                 "task's eval_* metrics (as Hugging Face's eval_steps); 0: only after training")
          .at_least(0),
      string_option("stop_when", "",
                    "\"METRIC >= VALUE\" or \"METRIC <= VALUE\", e.g. \"eval_accuracy >= 0.8\": "
                    "training ends at the first evaluation of eval_every_steps that meets it (the "
                    "learning-rate schedule stays the whole run's); empty: never"),
      string_option("on_nonfinite", "stop",
                    "a NaN or infinite loss or gradient: stop with an error naming the step and "
                    "parameter, or skip the step's update and count it (skip_step)")
          .one_of({"stop", "skip_step"}),
      string_option("precision", "fp32",
                    "fp32; bf16 or fp16: the forward pass under autocast (matrix products in "
                    "16 bits, reductions and losses in fp32), fp32 master weights and optimizer "
                    "state; fp16 needs a CUDA device")
          .one_of({"fp32", "bf16", "fp16"}),
      string_option("loss_scaling", "auto",
                    "dynamic loss scaling as torch.amp.GradScaler (a non-finite step is "
                    "skipped, counted in skipped_steps, and the scale backs off): auto = on for "
                    "fp16 only, dynamic = on, none = off")
          .one_of({"auto", "dynamic", "none"}),
      float_option("loss_scale_init", 65536.0, "the first loss scale").above(0),
      float_option("loss_scale_growth_factor", 2.0,
                   "the scale's factor after loss_scale_growth_interval finite steps in a row")
          .above(1),
      float_option("loss_scale_backoff_factor", 0.5, "the scale's factor after a non-finite step")
          .in_range(0, 1)
          .above(0),
      int_option("loss_scale_growth_interval", 2000, "finite steps in a row before the scale grows")
          .at_least(1),
      bool_option("allow_tf32", false,
                  "TF32 for fp32 matrix products on CUDA (torch.backends.cuda.matmul."
                  "allow_tf32); off by default, as in PyTorch"),
      bool_option("do_train", true, "train the model"),
      bool_option("do_eval", true, "evaluate after training and write eval_results.json"),
      int_option("save_checkpoints_steps", 0,
                 "steps between resumable checkpoints in VARIANT/checkpoints/; 0: none")
          .at_least(0),
      int_option("keep_checkpoint_max", 5, "newest checkpoints kept; 0: all").at_least(0),
      bool_option("resume", false,
                  "continue from the newest checkpoint in VARIANT/checkpoints/ (--resume)"),
  };
}

std::vector<OptionDecl> strategy_host_options() {
  return {
      plugin_option("strategy"),
      string_option("device", "cpu",
                    "cpu, or cuda / cuda:N with a CUDA libtorch; under launcher = \"env\", "
                    "\"cuda\" is the device LOCAL_RANK"),
      string_option("backend", "auto",
                    "collectives: auto = nccl for CUDA ranks that are processes, gloo otherwise "
                    "(thread ranks share one device; Gloo stages CUDA tensors through the host)")
          .one_of({"auto", "gloo", "nccl"}),
      int_option("replicas", 1, "data-parallel replicas (ranks) on this machine").at_least(1),
      string_option("launcher", "threads",
                    "threads: ranks are threads of this process; env: one process per rank, from "
                    "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (bertlab launch, torchrun, Slurm)")
          .one_of({"threads", "env"}),
      int_option("check_every_steps", 100,
                 "steps between checks that every replica holds the same parameters")
          .at_least(1),
      string_option("loss_normalization", "global",
                    "token-weighted losses (masked LM): global divides by the masked tokens of "
                    "all replicas, so N replicas equal one device; per_replica averages each "
                    "replica's own mean")
          .one_of({"global", "per_replica"}),
      float_option("timeout_s", 300.0,
                   "seconds a collective may wait for the other ranks before it is an error")
          .above(0),
  };
}

OptionDecl plugin_option(const char* kind) {
  return string_option("plugin", "", std::string("name of the ") + kind + " component")
      .mark_required();
}

OptionDecl adversarial_plugin_option() {
  return string_option("plugin", "none",
                       "name of the adversarial component (fgm, pgd, freelb), or none: plain "
                       "training");
}

std::string StopWhen::text() const {
  return fmt::format("{} {} {}", metric, at_least ? ">=" : "<=", value);
}

std::optional<StopWhen> parse_stop_when(const std::string& text, std::string* problem) {
  const size_t op = text.find_first_of("<>");
  StopWhen out;
  std::string metric = op == std::string::npos ? text : text.substr(0, op);
  metric.erase(metric.find_last_not_of(" \t") + 1);
  metric.erase(0, metric.find_first_not_of(" \t"));
  const bool valid_metric =
      !metric.empty() && std::all_of(metric.begin(), metric.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.';
      });
  if (op == std::string::npos || op + 1 >= text.size() || text[op + 1] != '=' || !valid_metric) {
    *problem = fmt::format(
        "'{}' is not \"METRIC >= VALUE\" or \"METRIC <= VALUE\" (e.g. "
        "\"eval_accuracy >= 0.8\")",
        text);
    return std::nullopt;
  }
  out.metric = metric;
  out.at_least = text[op] == '>';
  const std::string number = text.substr(op + 2);
  char* end = nullptr;
  out.value = std::strtod(number.c_str(), &end);
  while (end != nullptr && (*end == ' ' || *end == '\t')) ++end;
  if (end == number.c_str() || end == nullptr || *end != '\0' || !std::isfinite(out.value)) {
    *problem = fmt::format("'{}': the value after {}= is not a finite number", text, text[op]);
    return std::nullopt;
  }
  return out;
}

}  // namespace bertlab
