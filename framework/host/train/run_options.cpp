// RunOptions read from a resolved (validated) variant.

#include "train/run_options.h"

#include <sstream>

namespace bertlab {

namespace {

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream list(text);
  for (std::string part; std::getline(list, part, ',');) {
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

}  // namespace

RunOptions RunOptions::from_variant(const ResolvedVariant& variant) {
  const ConfigView& e = variant.experiment;
  const ConfigView& m = variant.model;
  const ConfigView& s = variant.strategy_host;
  const ConfigView& t = variant.train;
  RunOptions o;
  o.seed = static_cast<uint64_t>(e.get_int("seed"));
  o.threads = static_cast<int>(e.get_int("threads"));
  o.tensorboard = e.get_bool("tensorboard");
  o.export_hf = e.get_bool("export_hf");

  o.vocab_file = m.get_path("vocab_file");
  o.do_lower_case = m.get_bool("do_lower_case");
  o.sparse_embeddings = m.get_bool("sparse_embeddings");
  o.per_example_dropout = m.get_string("dropout_rng") == "per_example";
  o.init_checkpoint = m.get_path("init_checkpoint");
  o.init_checkpoint_exclude = comma_list(m.get_string("init_checkpoint_exclude"));

  o.replicas = static_cast<int>(s.get_int("replicas"));
  o.env_launcher = s.get_string("launcher") == "env";
  o.backend = s.get_string("backend");
  o.device = s.get_string("device");
  o.timeout_s = s.get_float("timeout_s");
  o.check_every_steps = s.get_int("check_every_steps");
  o.global_loss_normalization = s.get_string("loss_normalization") == "global";

  o.do_train = t.get_bool("do_train");
  o.do_eval = t.get_bool("do_eval");
  o.resume = t.get_bool("resume");
  o.train_batch_size = t.get_int("train_batch_size");
  o.gradient_accumulation_steps = t.get_int("gradient_accumulation_steps");
  o.eval_batch_size = t.get_int("eval_batch_size");
  o.num_train_steps = t.get_int("num_train_steps");
  o.num_train_epochs = t.get_float("num_train_epochs");
  o.log_every_steps = t.get_int("log_every_steps");
  o.eval_every_steps = t.get_int("eval_every_steps");
  std::string problem;  // resolving the variant reported it
  if (const std::string text = t.get_string("stop_when"); !text.empty()) {
    o.stop_when = parse_stop_when(text, &problem);
  }
  o.save_checkpoints_steps = t.get_int("save_checkpoints_steps");
  o.keep_checkpoint_max = t.get_int("keep_checkpoint_max");
  o.skip_nonfinite = t.get_string("on_nonfinite") == "skip_step";
  o.precision = PrecisionOptions::from_config(t);
  return o;
}

}  // namespace bertlab
