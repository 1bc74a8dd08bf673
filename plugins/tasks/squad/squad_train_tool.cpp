// `bertlab squad train`: run_squad.py's command line, run as the equivalent experiment.

#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/log.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <bertlab/absl_flags.h>
#include <bertlab/io/python_json.h>
#include "squad_tools.h"

namespace bertlab::squad {

namespace fs = std::filesystem;

namespace {

// run_squad.py's flags with its defaults and, after them, the multi-GPU fork's --num_gpus and
// bertlab's own.
void add_run_squad_flags(FlagSet& f) {
  f.add_string("bert_config_file", "", "bert_config.json of the pre-trained model (required)");
  f.add_string("vocab_file", "", "vocabulary of the model (required)");
  f.add_string("output_dir", "", "where the run's folder goes (required)");
  f.add_string("train_file", "", "SQuAD JSON for training (with --do_train)");
  f.add_string("predict_file", "", "SQuAD JSON to predict and score (with --do_predict)");
  f.add_string("init_checkpoint", "", "pre-trained weights (TensorFlow, PyTorch, safetensors)");
  f.add_bool("do_lower_case", true, "lower-case the text (uncased models)");
  f.add_int("max_seq_length", 384, "tokens per window");
  f.add_int("doc_stride", 128, "tokens between window starts");
  f.add_int("max_query_length", 64, "question tokens kept");
  f.add_bool("do_train", false, "train");
  f.add_bool("do_predict", false, "predict --predict_file and score it");
  f.add_int("train_batch_size", 32, "global training batch");
  f.add_int("predict_batch_size", 8, "prediction batch");
  f.add_float("learning_rate", 5e-5, "peak learning rate of Adam");
  f.add_float("num_train_epochs", 3.0, "epochs over the training set");
  f.add_float("warmup_proportion", 0.1, "share of the steps with linear warm-up");
  f.add_int("save_checkpoints_steps", 1000, "steps between checkpoints (only when given)");
  f.add_int("iterations_per_loop", 1000, "TPU only; ignored");
  f.add_int("n_best_size", 20, "n-best candidates per question");
  f.add_int("max_answer_length", 30, "longest answer in tokens");
  f.add_bool("use_tpu", false, "not supported");
  f.add_string("tpu_name", "", "TPU only; ignored");
  f.add_string("tpu_zone", "", "TPU only; ignored");
  f.add_string("gcp_project", "", "TPU only; ignored");
  f.add_string("master", "", "TPU only; ignored");
  f.add_int("num_tpu_cores", 8, "TPU only; ignored");
  f.add_bool("verbose_logging", false, "accepted; bertlab logs alignment failures at debug level");
  f.add_bool("version_2_with_negative", false, "SQuAD 2.0: questions may have no answer");
  f.add_float("null_score_diff_threshold", 0.0, "v2: predict no answer above this score gap");
  f.add_int("num_gpus", 1, "data-parallel replicas (the multi-GPU fork's flag)");
  f.add_string("strategy", "mirrored",
               "bertlab: how replicas average gradients (mirrored or sparse_allgather)");
  f.add_string("device", "cpu", "bertlab: cpu, or cuda:N with a CUDA libtorch");
  f.add_int("seed", 12345, "bertlab: seed of initialization, dropout and batch order");
  f.add_int("threads", 1, "bertlab: intra-op and BLAS threads per process");
  f.add_string("write_experiment", "",
               "bertlab: write the equivalent experiment file here instead of running it");
}

std::string toml_string(const std::string& text) { return nlohmann::json(text).dump(); }

// A path from the command line, made absolute so the experiment file works from anywhere.
std::string toml_path(const std::string& path) {
  return toml_string(fs::absolute(path).lexically_normal().string());
}

std::string toml_bool(bool value) { return value ? "true" : "false"; }

void require(const FlagSet& flags, const char* name, const char* why) {
  if (flags.get_string(name).empty()) {
    throw ConfigError(fmt::format("bertlab squad train: --{} is required{}", name, why));
  }
}

void validate(const FlagSet& flags) {
  require(flags, "bert_config_file", "");
  require(flags, "vocab_file", "");
  require(flags, "output_dir", "");
  if (!flags.get_bool("do_train") && !flags.get_bool("do_predict")) {
    throw ConfigError(
        "bertlab squad train: at least one of --do_train or --do_predict must be true (as "
        "run_squad.py)");
  }
  if (flags.get_bool("do_train")) require(flags, "train_file", " with --do_train");
  if (flags.get_bool("do_predict")) require(flags, "predict_file", " with --do_predict");
  if (flags.get_bool("use_tpu")) {
    throw ConfigError(
        "bertlab squad train: --use_tpu: bertlab has no TPU support; use "
        "--num_gpus=N for N data-parallel replicas");
  }
  if (flags.get_int("num_gpus") < 1) {
    throw ConfigError(fmt::format("bertlab squad train: --num_gpus ({}) must be >= 1",
                                  flags.get_int("num_gpus")));
  }
  const std::string& strategy = flags.get_string("strategy");
  if (strategy != "mirrored" && strategy != "sparse_allgather") {
    throw ConfigError(fmt::format(
        "bertlab squad train: --strategy \"{}\": use mirrored or sparse_allgather", strategy));
  }
  for (const char* ignored : {"tpu_name", "tpu_zone", "gcp_project", "master"}) {
    if (flags.given(ignored))
      log_warning("config", "squad train: --{} is TPU-only; ignored", ignored);
  }
}

// The experiment file equivalent to the flags.
std::string experiment_text(const FlagSet& flags, const std::vector<std::string>& args) {
  const int64_t replicas = flags.get_int("num_gpus");
  const std::string strategy = replicas == 1 ? "single" : flags.get_string("strategy");
  const std::string variant = replicas == 1 ? "single" : fmt::format("{}-{}", strategy, replicas);
  std::string t;
  t += "# Written by `bertlab squad train` from run_squad.py's flags:\n#  ";
  for (const auto& arg : args) t += " " + arg;
  t += "\n# Run it with `bertlab run THIS_FILE`.\n\n";
  t += "[experiment]\nname = \"run_squad\"\n";
  t += fmt::format("seed = {}\nthreads = {}\noutput_dir = {}\n\n", flags.get_int("seed"),
                   flags.get_int("threads"), toml_path(flags.get_string("output_dir")));
  t += fmt::format("[model]\nbert_config_file = {}\nvocab_file = {}\ndo_lower_case = {}\n",
                   toml_path(flags.get_string("bert_config_file")),
                   toml_path(flags.get_string("vocab_file")),
                   toml_bool(flags.get_bool("do_lower_case")));
  if (!flags.get_string("init_checkpoint").empty()) {
    // A TensorFlow prefix (bert_model.ckpt) is not a file: keep it as given, made absolute.
    t += fmt::format("init_checkpoint = {}\n", toml_path(flags.get_string("init_checkpoint")));
  }
  t += fmt::format("sparse_embeddings = {}\n\n", toml_bool(strategy == "sparse_allgather"));
  t += "[task]\nplugin = \"squad\"\n";
  if (!flags.get_string("train_file").empty()) {
    t += fmt::format("train_file = {}\n", toml_path(flags.get_string("train_file")));
  }
  if (!flags.get_string("predict_file").empty()) {
    t += fmt::format("predict_file = {}\n", toml_path(flags.get_string("predict_file")));
  }
  t += fmt::format("version_2_with_negative = {}\n",
                   toml_bool(flags.get_bool("version_2_with_negative")));
  for (const char* key :
       {"max_seq_length", "doc_stride", "max_query_length", "n_best_size", "max_answer_length"}) {
    t += fmt::format("{} = {}\n", key, flags.get_int(key));
  }
  t += fmt::format("null_score_diff_threshold = {}\n\n",
                   python_float_repr(flags.get_float("null_score_diff_threshold")));
  t += fmt::format("[strategy]\nplugin = \"{}\"\ndevice = {}\nreplicas = {}\n\n", strategy,
                   toml_string(flags.get_string("device")), replicas);
  t += fmt::format(
      "[optimizer]\nplugin = \"adam_weight_decay\"\nlearning_rate = {}\n"
      "warmup_proportion = {}\n\n",
      python_float_repr(flags.get_float("learning_rate")),
      python_float_repr(flags.get_float("warmup_proportion")));
  t += fmt::format(
      "[train]\ntrain_batch_size = {}\neval_batch_size = {}\nnum_train_epochs = {}\n"
      "do_train = {}\ndo_eval = {}\n",
      flags.get_int("train_batch_size"), flags.get_int("predict_batch_size"),
      python_float_repr(flags.get_float("num_train_epochs")), toml_bool(flags.get_bool("do_train")),
      toml_bool(flags.get_bool("do_predict")));
  if (flags.given("save_checkpoints_steps")) {
    t += fmt::format("save_checkpoints_steps = {}\n", flags.get_int("save_checkpoints_steps"));
  }
  t += fmt::format("\n[[variant]]\nname = \"{}\"\n", variant);
  return t;
}

}  // namespace

int train_tool(const std::vector<std::string>& args) {
  FlagSet flags("bertlab squad train");
  add_run_squad_flags(flags);
  const auto positional = flags.parse(args);
  if (flags.help_requested()) {
    std::fputs(flags.usage().c_str(), stdout);
    return 0;
  }
  if (!positional.empty()) {
    throw ConfigError(
        fmt::format("bertlab squad train: unexpected argument \"{}\"; every setting is a --flag",
                    positional[0]));
  }
  validate(flags);
  const std::string text = experiment_text(flags, args);
  if (!flags.get_string("write_experiment").empty()) {
    const fs::path out = flags.get_string("write_experiment");
    write_file_atomic(out, text);
    log_info("config", "squad train: wrote {}; run it with `bertlab run {}`", out.string(),
             out.string());
    return 0;
  }
  const fs::path file = fs::path(flags.get_string("output_dir")) / "run_squad.toml";
  write_file_atomic(file, text);
  log_info("config", "squad train: running {} (the experiment equivalent to these flags)",
           file.string());
  std::fflush(stdout);
  std::fflush(stderr);
  // The same executable, as if the user had typed `bertlab run FILE`.
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string file_arg = file.string();
  std::vector<char*> argv = {const_cast<char*>(self.c_str()), const_cast<char*>("run"),
                             const_cast<char*>(file_arg.c_str()), nullptr};
  ::execv(self.c_str(), argv.data());
  throw Error(fmt::format("bertlab squad train: could not start {} run {}: {}", self, file_arg,
                          std::strerror(errno)));
}

}  // namespace bertlab::squad
