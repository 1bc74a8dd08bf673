#include "squad_task.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <bertlab/error.h>
#include <bertlab/log.h>
#include <bertlab/model/bert.h>
#include <bertlab/task_helpers.h>
#include <bertlab/text/tokenizer.h>

#include <algorithm>
#include <set>
#include <string>

#include "squad_eval.h"
#include "squad_json.h"
#include "squad_model.h"
#include "squad_predict.h"

namespace bertlab::squad {

namespace {

SquadModelImpl& as_squad_model(torch::nn::Module& model) {
  auto* squad = dynamic_cast<SquadModelImpl*>(&model);
  BERTLAB_CHECK(squad != nullptr,
                "the squad task got a model of another type ({}); pass the module that its "
                "create_model() returned",
                model.name());
  return *squad;
}

/// input_ids, input_mask, segment_ids of `features[indices]`, and the answer positions.
Batch collate(const std::vector<SquadFeature>& features, const std::vector<int64_t>& indices,
              const c10::Device& device, bool with_positions) {
  BERTLAB_CHECK(!indices.empty(), "cannot collate an empty batch");
  const auto batch_size = static_cast<int64_t>(indices.size());
  const auto num_features = static_cast<int64_t>(features.size());
  for (const int64_t index : indices) {
    BERTLAB_CHECK(index >= 0 && index < num_features,
                  "feature index {} is out of range: the set has {} features", index, num_features);
  }
  const auto seq_length = static_cast<int64_t>(features[indices[0]].input_ids.size());
  at::Tensor input_ids = at::empty({batch_size, seq_length}, at::kLong);
  at::Tensor input_mask = at::empty({batch_size, seq_length}, at::kLong);
  at::Tensor segment_ids = at::empty({batch_size, seq_length}, at::kLong);
  at::Tensor start_positions = at::empty({batch_size}, at::kLong);
  at::Tensor end_positions = at::empty({batch_size}, at::kLong);
  int64_t* ids_out = input_ids.data_ptr<int64_t>();
  int64_t* mask_out = input_mask.data_ptr<int64_t>();
  int64_t* segments_out = segment_ids.data_ptr<int64_t>();
  for (int64_t row = 0; row < batch_size; ++row) {  // row: position in the batch
    const SquadFeature& f = features[indices[row]];
    BERTLAB_CHECK(static_cast<int64_t>(f.input_ids.size()) == seq_length,
                  "feature {} has {} tokens, the batch {}", indices[row], f.input_ids.size(),
                  seq_length);
    std::copy(f.input_ids.begin(), f.input_ids.end(), ids_out + row * seq_length);
    std::copy(f.input_mask.begin(), f.input_mask.end(), mask_out + row * seq_length);
    std::copy(f.segment_ids.begin(), f.segment_ids.end(), segments_out + row * seq_length);
    start_positions.data_ptr<int64_t>()[row] = f.start_position;
    end_positions.data_ptr<int64_t>()[row] = f.end_position;
  }
  Batch batch{{"input_ids", input_ids.to(device)},
              {"input_mask", input_mask.to(device)},
              {"segment_ids", segment_ids.to(device)}};
  if (with_positions) {
    batch.emplace("start_positions", start_positions.to(device));
    batch.emplace("end_positions", end_positions.to(device));
  }
  return batch;
}

/// The "data" array of a SQuAD dataset with only the questions in `ids`.
nlohmann::json keep_questions(const nlohmann::json& data, const std::set<std::string>& ids) {
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& article : data) {
    nlohmann::json paragraphs = nlohmann::json::array();
    for (const auto& paragraph : article.at("paragraphs")) {
      nlohmann::json qas = nlohmann::json::array();
      for (const auto& qa : paragraph.at("qas")) {
        if (ids.count(qa.at("id").get<std::string>()) != 0) qas.push_back(qa);
      }
      if (qas.empty()) continue;
      nlohmann::json p = paragraph;
      p["qas"] = std::move(qas);
      paragraphs.push_back(std::move(p));
    }
    if (paragraphs.empty()) continue;
    nlohmann::json a = article;
    a["paragraphs"] = std::move(paragraphs);
    kept.push_back(std::move(a));
  }
  return kept;
}

template <typename T>
void keep_first(std::vector<T>& items, int64_t limit) {
  if (limit > 0 && static_cast<size_t>(limit) < items.size()) items.resize(limit);
}

std::vector<float> to_floats(const at::Tensor& row) {
  const at::Tensor cpu = row.to(at::kCPU, at::kFloat).contiguous();
  const float* data = cpu.data_ptr<float>();
  return std::vector<float>(data, data + cpu.numel());
}

}  // namespace

void SquadTask::prepare(const TaskContext& ctx) {
  BERTLAB_CHECK(ctx.tokenizer != nullptr, "the squad task needs a tokenizer ([model] vocab_file)");
  BERTLAB_CHECK_AS(ConfigError, !options_.train_file.empty() || !options_.predict_file.empty(),
                   "task: set train_file, predict_file or both (run_squad.py's --train_file / "
                   "--predict_file)");
  // As run_squad.py's validate_flags_or_throw.
  BERTLAB_CHECK_AS(ConfigError, options_.max_seq_length > options_.max_query_length + 3,
                   "task.max_seq_length ({}) must be greater than max_query_length ({}) + 3: "
                   "[CLS], two [SEP] and at least one document token",
                   options_.max_seq_length, options_.max_query_length);
  if (ctx.bert_config != nullptr) {
    const int64_t max_positions = ctx.bert_config->max_position_embeddings;
    BERTLAB_CHECK_AS(ConfigError, options_.max_seq_length <= max_positions,
                     "task.max_seq_length: {} is longer than the model's max_position_embeddings "
                     "({}); BERT was only trained up to that length, lower max_seq_length",
                     options_.max_seq_length, max_positions);
  }
  const FullTokenizer& tokenizer = *ctx.tokenizer;
  do_lower_case_ = tokenizer.do_lower_case();
  FeatureOptions feature_options;
  feature_options.max_seq_length = options_.max_seq_length;
  feature_options.doc_stride = options_.doc_stride;
  feature_options.max_query_length = options_.max_query_length;

  if (!options_.train_file.empty()) {
    ReadReport report;
    std::vector<SquadExample> train = read_squad_examples(
        options_.train_file, ReadOptions{true, options_.version_2_with_negative}, &report);
    const size_t in_file = train.size();
    keep_first(train, options_.max_train_examples);
    BERTLAB_CHECK_AS(DataError, !train.empty(), "{}: no training questions",
                     options_.train_file.string());
    feature_options.is_training = true;
    train_features_ = convert_examples_to_features(train, tokenizer, feature_options);
    log_info("data",
             "squad: {} training questions (of {} usable, {} skipped) → {} features from {}",
             train.size(), in_file, report.skipped_ids.size() + report.empty_context_ids.size(),
             train_features_.size(), options_.train_file.string());
  }
  if (!options_.predict_file.empty()) {
    const nlohmann::json dataset = read_json_file(options_.predict_file);
    eval_is_v2_ = is_squad_v2(dataset);
    if (eval_is_v2_ && !options_.version_2_with_negative) {
      log_warning("data",
                  "squad: {} is a SQuAD 2.0 file but task.version_2_with_negative is false: no "
                  "question will be answered with \"\", which the v2.0 metrics count as wrong",
                  options_.predict_file.string());
    }
    eval_examples_ = read_squad_examples(options_.predict_file,
                                         ReadOptions{false, options_.version_2_with_negative});
    keep_first(eval_examples_, options_.max_eval_examples);
    BERTLAB_CHECK_AS(DataError, !eval_examples_.empty(), "{}: no questions to predict",
                     options_.predict_file.string());
    feature_options.is_training = false;
    eval_features_ = convert_examples_to_features(eval_examples_, tokenizer, feature_options);
    std::set<std::string> ids;
    for (const auto& example : eval_examples_) ids.insert(example.qas_id);
    eval_data_ = keep_questions(dataset.at("data"), ids);
    log_info("data", "squad: {} questions to predict → {} features from {} (SQuAD {})",
             eval_examples_.size(), eval_features_.size(), options_.predict_file.string(),
             eval_is_v2_ ? "2.0" : "1.1");
  }
}

int64_t SquadTask::num_train_examples() const {
  return static_cast<int64_t>(train_features_.size());
}

std::shared_ptr<torch::nn::Module> SquadTask::create_model(const BertConfig& config,
                                                           bool sparse_embeddings) const {
  return SquadModel(config, sparse_embeddings).ptr();
}

Batch SquadTask::make_train_batch(const std::vector<int64_t>& indices,
                                  const c10::Device& device) const {
  return collate(train_features_, indices, device, /*with_positions=*/true);
}

LossOutput SquadTask::compute_loss(torch::nn::Module& model, const Batch& batch) const {
  SquadModelImpl& squad = as_squad_model(model);
  const SpanLogits logits =
      squad.forward(batch_tensor(batch, "input_ids"), batch_tensor(batch, "segment_ids"),
                    batch_tensor(batch, "input_mask"));
  const at::Tensor& start_positions = batch_tensor(batch, "start_positions");
  LossOutput out;
  out.loss = span_loss(logits, start_positions, batch_tensor(batch, "end_positions"));
  out.num_examples = start_positions.size(0);
  return out;
}

Metrics SquadTask::evaluate(torch::nn::Module& model, const EvalContext& ctx) const {
  BERTLAB_CHECK_AS(ConfigError, !eval_features_.empty(),
                   "the squad task has nothing to evaluate: set task.predict_file, or "
                   "train.do_eval = false");
  BERTLAB_CHECK(ctx.eval_batch_size > 0, "eval_batch_size ({}) must be positive",
                ctx.eval_batch_size);
  SquadModelImpl& squad = as_squad_model(model);
  const EvalModeScope eval_mode(squad);
  const at::NoGradGuard no_grad;

  const auto total = static_cast<int64_t>(eval_features_.size());
  std::vector<RawResult> results;  // [eval feature]
  results.reserve(eval_features_.size());
  for (int64_t start = 0; start < total; start += ctx.eval_batch_size) {
    std::vector<int64_t> indices(std::min(ctx.eval_batch_size, total - start));
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = start + static_cast<int64_t>(i);
    const Batch batch = collate(eval_features_, indices, ctx.device, /*with_positions=*/false);
    const SpanLogits logits =
        squad.forward(batch.at("input_ids"), batch.at("segment_ids"), batch.at("input_mask"));
    for (size_t i = 0; i < indices.size(); ++i) {
      const auto row = static_cast<int64_t>(i);
      results.push_back(RawResult{eval_features_[indices[i]].unique_id,
                                  to_floats(logits.start[row]), to_floats(logits.end[row])});
    }
  }

  PredictionOptions prediction_options;
  prediction_options.n_best_size = options_.n_best_size;
  prediction_options.max_answer_length = options_.max_answer_length;
  prediction_options.do_lower_case = do_lower_case_;
  prediction_options.version_2_with_negative = options_.version_2_with_negative;
  prediction_options.null_score_diff_threshold = options_.null_score_diff_threshold;
  const SquadPredictions predictions =
      make_predictions(eval_examples_, eval_features_, results, prediction_options);
  if (!ctx.output_dir.empty()) {  // none during training ([train] eval_every_steps)
    write_prediction_files(predictions, ctx.output_dir, options_.version_2_with_negative);
  }

  AnswerMap answers(predictions.answers.begin(), predictions.answers.end());
  EvalResult scored;
  if (eval_is_v2_) {
    std::optional<NullOddsMap> null_odds;
    if (options_.version_2_with_negative) {
      null_odds = NullOddsMap(predictions.null_odds.begin(), predictions.null_odds.end());
    }
    scored = evaluate_v2(eval_data_, answers, null_odds);
  } else {
    scored = evaluate_v1(eval_data_, answers);
  }
  Metrics metrics;
  for (const auto& [name, value] : scored.metrics.items()) {
    metrics.emplace_back(name, value.get<double>());
  }
  std::string summary;
  for (const auto& [name, value] : metrics) summary += fmt::format(" {} {:.2f}", name, value);
  log_info("eval", "squad: {} questions, {} features:{}; predictions in {}", eval_examples_.size(),
           total, summary, ctx.output_dir.string());
  return metrics;
}

}  // namespace bertlab::squad
