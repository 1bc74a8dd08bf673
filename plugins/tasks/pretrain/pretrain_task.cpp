// run_pretraining.py as a bertlab Task.

#include "pretrain_task.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/log.h>
#include <bertlab/model/bert.h>
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "pretrain_model.h"
#include "tfrecord.h"

namespace bertlab::pretrain {

namespace fs = std::filesystem;

std::vector<OptionDecl> pretrain_option_decls() {
  return {
      path_option("input_file",
                  "instances from `bertlab pretrain create-data` (NAME.jsonl or a TFRecord); "
                  "required when [train] do_train or do_eval")
          .mark_required(),
      path_option("eval_file", "instances to evaluate; empty: input_file (as run_pretraining.py)"),
      int_option("max_seq_length", 128, "the instances' length (run_pretraining.py's flag)")
          .in_range(5, 512),
      int_option("max_predictions_per_seq", 20, "the instances' masked-LM slots").at_least(1),
      int_option("max_eval_steps", 100, "evaluation batches at most").at_least(1),
  };
}

PretrainOptions PretrainOptions::from_config(const ConfigView& view) {
  PretrainOptions o;
  o.input_file = view.get_path("input_file");
  o.eval_file = view.get_path("eval_file");
  o.max_seq_length = view.get_int("max_seq_length");
  o.max_predictions_per_seq = view.get_int("max_predictions_per_seq");
  o.max_eval_steps = view.get_int("max_eval_steps");
  return o;
}

namespace {

// The seven features of one instance, checked against the lengths the task expects.
InstanceFeatures check_features(InstanceFeatures f, const std::string& where, int64_t seq,
                                int64_t predictions) {
  const auto expect = [&](const char* name, size_t got, int64_t want) {
    if (static_cast<int64_t>(got) != want) {
      throw DataError(fmt::format(
          "{}: {} has {} values, expected {}; create the data with the task's max_seq_length "
          "and max_predictions_per_seq",
          where, name, got, want));
    }
  };
  expect("input_ids", f.input_ids.size(), seq);
  expect("input_mask", f.input_mask.size(), seq);
  expect("segment_ids", f.segment_ids.size(), seq);
  expect("masked_lm_positions", f.masked_lm_positions.size(), predictions);
  expect("masked_lm_ids", f.masked_lm_ids.size(), predictions);
  expect("masked_lm_weights", f.masked_lm_weights.size(), predictions);
  expect("next_sentence_labels", f.next_sentence_labels.size(), 1);
  for (const int64_t p : f.masked_lm_positions) {
    if (p < 0 || p >= seq) {
      throw DataError(
          fmt::format("{}: masked_lm_positions holds {}, outside [0, {})", where, p, seq));
    }
  }
  return f;
}

template <typename T>
std::vector<T> json_list(const nlohmann::json& line, const char* name, const std::string& where) {
  const auto it = line.find(name);
  if (it == line.end() || !it->is_array()) {
    throw DataError(fmt::format("{}: no \"{}\" list (the features of create-data)", where, name));
  }
  return it->get<std::vector<T>>();
}

template <typename T>
std::vector<T> example_list(const ExampleFeatures& example, const char* name,
                            const std::string& where) {
  for (const auto& [key, values] : example) {
    if (key != name) continue;
    if (const auto* v = std::get_if<std::vector<T>>(&values)) return *v;
    throw DataError(
        fmt::format("{}: feature {} has the wrong kind (int64 or float list)", where, name));
  }
  throw DataError(fmt::format("{}: no feature \"{}\"", where, name));
}

bool is_jsonl(const fs::path& path) { return path.extension() == ".jsonl"; }

}  // namespace

std::vector<InstanceFeatures> read_instances(const fs::path& path, int64_t max_seq_length,
                                             int64_t max_predictions_per_seq) {
  std::vector<InstanceFeatures> out;
  if (is_jsonl(path)) {
    std::ifstream in(path);
    if (!in) throw DataError(fmt::format("{}: cannot read the instances", path.string()));
    int64_t line_number = 0;
    for (std::string text; std::getline(in, text);) {
      ++line_number;
      if (text.empty()) continue;
      const std::string where = fmt::format("{}:{}", path.string(), line_number);
      nlohmann::json line;
      try {
        line = nlohmann::json::parse(text);
      } catch (const nlohmann::json::parse_error& e) {
        throw DataError(fmt::format("{}: not JSON: {}", where, e.what()));
      }
      InstanceFeatures f;
      f.input_ids = json_list<int64_t>(line, "input_ids", where);
      f.input_mask = json_list<int64_t>(line, "input_mask", where);
      f.segment_ids = json_list<int64_t>(line, "segment_ids", where);
      f.masked_lm_positions = json_list<int64_t>(line, "masked_lm_positions", where);
      f.masked_lm_ids = json_list<int64_t>(line, "masked_lm_ids", where);
      f.masked_lm_weights = json_list<float>(line, "masked_lm_weights", where);
      f.next_sentence_labels = json_list<int64_t>(line, "next_sentence_labels", where);
      out.push_back(check_features(std::move(f), where, max_seq_length, max_predictions_per_seq));
    }
  } else {
    const auto records = read_tfrecords(path);
    for (size_t r = 0; r < records.size(); ++r) {
      const std::string where = fmt::format("{}: record {}", path.string(), r);
      const ExampleFeatures example = parse_example(records[r], where);
      InstanceFeatures f;
      f.input_ids = example_list<int64_t>(example, "input_ids", where);
      f.input_mask = example_list<int64_t>(example, "input_mask", where);
      f.segment_ids = example_list<int64_t>(example, "segment_ids", where);
      f.masked_lm_positions = example_list<int64_t>(example, "masked_lm_positions", where);
      f.masked_lm_ids = example_list<int64_t>(example, "masked_lm_ids", where);
      f.masked_lm_weights = example_list<float>(example, "masked_lm_weights", where);
      f.next_sentence_labels = example_list<int64_t>(example, "next_sentence_labels", where);
      out.push_back(check_features(std::move(f), where, max_seq_length, max_predictions_per_seq));
    }
  }
  if (out.empty()) {
    throw DataError(fmt::format("{}: no instances; create them with `bertlab pretrain create-data`",
                                path.string()));
  }
  return out;
}

namespace {

Batch collate(const std::vector<InstanceFeatures>& set, const std::vector<int64_t>& indices,
              const c10::Device& device) {
  BERTLAB_CHECK(!indices.empty(), "cannot collate an empty batch");
  const auto rows = static_cast<int64_t>(indices.size());
  const auto& first = set.at(static_cast<size_t>(indices[0]));
  const auto seq = static_cast<int64_t>(first.input_ids.size());
  const auto predictions = static_cast<int64_t>(first.masked_lm_positions.size());
  const auto longs = [&](int64_t width, auto member) {
    at::Tensor t = at::empty({rows, width}, at::kLong);
    int64_t* out = t.data_ptr<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const auto& values = set.at(static_cast<size_t>(indices[r])).*member;
      std::copy(values.begin(), values.end(), out + r * width);
    }
    return t.to(device);
  };
  at::Tensor weights = at::empty({rows, predictions}, at::kFloat);
  for (int64_t r = 0; r < rows; ++r) {
    const auto& w = set.at(static_cast<size_t>(indices[r])).masked_lm_weights;
    std::copy(w.begin(), w.end(), weights.data_ptr<float>() + r * predictions);
  }
  return Batch{
      {"input_ids", longs(seq, &InstanceFeatures::input_ids)},
      {"input_mask", longs(seq, &InstanceFeatures::input_mask)},
      {"segment_ids", longs(seq, &InstanceFeatures::segment_ids)},
      {"masked_lm_positions", longs(predictions, &InstanceFeatures::masked_lm_positions)},
      {"masked_lm_ids", longs(predictions, &InstanceFeatures::masked_lm_ids)},
      {"masked_lm_weights", weights.to(device)},
      {"next_sentence_labels", longs(1, &InstanceFeatures::next_sentence_labels).reshape({-1})}};
}

PretrainModelImpl& pretrain_model(torch::nn::Module& model) {
  auto* m = dynamic_cast<PretrainModelImpl*>(&model);
  BERTLAB_CHECK(m != nullptr, "the pretrain task got a model it did not create");
  return *m;
}

PretrainLosses forward_losses(PretrainModelImpl& model, const Batch& batch) {
  const PretrainLogits logits =
      model.forward(batch.at("input_ids"), batch.at("segment_ids"), batch.at("input_mask"),
                    batch.at("masked_lm_positions"));
  return pretrain_losses(logits, batch.at("masked_lm_ids"), batch.at("masked_lm_weights"),
                         batch.at("next_sentence_labels"));
}

}  // namespace

void PretrainTask::prepare(const TaskContext& ctx) {
  BERTLAB_CHECK_AS(ConfigError, ctx.bert_config != nullptr, "the pretrain task needs [model]");
  const int64_t positions = ctx.bert_config->max_position_embeddings;
  if (options_.max_seq_length > positions) {
    throw ConfigError(
        fmt::format("task.max_seq_length ({}) exceeds the model's max_position_embeddings ({})",
                    options_.max_seq_length, positions));
  }
  train_ = read_instances(options_.input_file, options_.max_seq_length,
                          options_.max_predictions_per_seq);
  const int64_t vocab = ctx.bert_config->vocab_size;
  for (size_t i = 0; i < train_.size(); ++i) {
    for (const int64_t id : train_[i].input_ids) {
      if (id < 0 || id >= vocab) {
        throw DataError(
            fmt::format("{}: instance {} holds token id {}, outside the model's "
                        "vocab_size {}; create the data with the model's vocab.txt",
                        options_.input_file.string(), i, id, vocab));
      }
    }
  }
  eval_ = options_.eval_file.empty() ? train_
                                     : read_instances(options_.eval_file, options_.max_seq_length,
                                                      options_.max_predictions_per_seq);
  log_info("data", "pretrain: {} training instances from {}, {} to evaluate", train_.size(),
           options_.input_file.string(), eval_.size());
}

int64_t PretrainTask::num_train_examples() const { return static_cast<int64_t>(train_.size()); }

std::shared_ptr<torch::nn::Module> PretrainTask::create_model(const BertConfig& config,
                                                              bool sparse_embeddings) const {
  return PretrainModel(config, sparse_embeddings).ptr();
}

Batch PretrainTask::make_train_batch(const std::vector<int64_t>& indices,
                                     const c10::Device& device) const {
  return collate(train_, indices, device);
}

LossOutput PretrainTask::compute_loss(torch::nn::Module& model, const Batch& batch) const {
  const PretrainLosses losses = forward_losses(pretrain_model(model), batch);
  LossOutput out;
  out.loss = losses.next_sentence_mean;
  out.weighted_loss_sum = losses.masked_lm_sum;
  out.num_examples = batch.at("input_ids").size(0);
  return out;
}

double PretrainTask::loss_weight(const Batch& batch) const {
  return batch.at("masked_lm_weights").sum().item<double>();
}

Metrics PretrainTask::evaluate(torch::nn::Module& model, const EvalContext& ctx) const {
  PretrainModelImpl& m = pretrain_model(model);
  const bool was_training = m.is_training();
  m.eval();
  const at::NoGradGuard no_grad;
  PretrainMetrics metrics;
  const auto total = static_cast<int64_t>(eval_.size());
  int64_t batches = 0;
  for (int64_t start = 0; start < total && batches < options_.max_eval_steps;
       start += ctx.eval_batch_size, ++batches) {
    std::vector<int64_t> indices;
    for (int64_t i = start; i < std::min(total, start + ctx.eval_batch_size); ++i) {
      indices.push_back(i);
    }
    const Batch batch = collate(eval_, indices, ctx.device);
    const PretrainLogits logits =
        m.forward(batch.at("input_ids"), batch.at("segment_ids"), batch.at("input_mask"),
                  batch.at("masked_lm_positions"));
    const PretrainLosses losses =
        pretrain_losses(logits, batch.at("masked_lm_ids"), batch.at("masked_lm_weights"),
                        batch.at("next_sentence_labels"));
    metrics.add(logits, losses, batch.at("masked_lm_ids"), batch.at("masked_lm_weights"),
                batch.at("next_sentence_labels"));
  }
  if (was_training) m.train();
  return {{"masked_lm_accuracy", metrics.masked_lm_accuracy()},
          {"masked_lm_loss", metrics.masked_lm_loss()},
          {"next_sentence_accuracy", metrics.next_sentence_accuracy()},
          {"next_sentence_loss", metrics.next_sentence_loss()},
          {"loss", metrics.masked_lm_loss() + metrics.next_sentence_loss()}};
}

}  // namespace bertlab::pretrain
