#include "classifier.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/log.h>
#include <bertlab/model/bert.h>
#include <bertlab/task_helpers.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "batching.h"
#include "classifier_model.h"
#include "metrics.h"

namespace bertlab::classifier {

namespace {

/// Keeps the first `limit` elements (file order); 0 keeps all.
template <typename T>
void keep_first(std::vector<T>& items, int64_t limit) {
  if (limit > 0 && static_cast<size_t>(limit) < items.size()) items.resize(limit);
}

ClassifierModelImpl& as_classifier(torch::nn::Module& model) {
  auto* classifier = dynamic_cast<ClassifierModelImpl*>(&model);
  BERTLAB_CHECK(classifier != nullptr,
                "the classifier task got a model of another type ({}); pass the module that "
                "its create_model() returned",
                model.name());
  return *classifier;
}

template <typename T>
void append_cpu(const at::Tensor& values, std::vector<T>& out) {
  const at::Tensor cpu = values.to(at::kCPU).contiguous();
  const T* data = cpu.data_ptr<T>();
  out.insert(out.end(), data, data + cpu.numel());
}

/// Appends a line per row of `logits` ([batch, labels]): its values, tab-separated, with the
/// digits that give the float back.
void append_logits_tsv(const at::Tensor& logits, std::string& out) {
  const at::Tensor cpu = logits.to(at::kCPU, at::kFloat).contiguous();
  const float* data = cpu.data_ptr<float>();
  const int64_t width = cpu.size(1);
  for (int64_t row = 0; row < cpu.size(0); ++row) {
    for (int64_t j = 0; j < width; ++j) {
      fmt::format_to(std::back_inserter(out), "{}{:.9g}", j == 0 ? "" : "\t",
                     data[row * width + j]);
    }
    out += '\n';
  }
}

}  // namespace

ClassifierTask::ClassifierTask(ClassifierOptions options)
    : options_(std::move(options)),
      processor_(make_processor(options_)),
      labels_(processor_->labels()) {}

void ClassifierTask::prepare(const TaskContext& ctx) {
  BERTLAB_CHECK(ctx.tokenizer != nullptr,
                "the classifier task needs a tokenizer ([model] vocab_file)");
  if (ctx.bert_config != nullptr) {
    const int64_t max_positions = ctx.bert_config->max_position_embeddings;
    BERTLAB_CHECK_AS(ConfigError, options_.max_seq_length <= max_positions,
                     "task.max_seq_length: {} is longer than the model's max_position_embeddings "
                     "({}); BERT was only trained up to that length, lower max_seq_length",
                     options_.max_seq_length, max_positions);
  }
  const FullTokenizer& tokenizer = *ctx.tokenizer;

  std::vector<InputExample> train = processor_->train_examples(options_.data_dir);
  const size_t train_in_files = train.size();
  keep_first(train, options_.max_train_examples);
  BERTLAB_CHECK_AS(DataError, !train.empty(), "{}: no training examples in {}", processor_->name(),
                   options_.data_dir.string());
  train_features_ = convert_examples(train, labels_, options_.max_seq_length, tokenizer);

  eval_sets_.clear();
  if (options_.eval_split == "train") {
    eval_sets_.push_back({"", train_features_});
    keep_first(eval_sets_.back().features, options_.max_eval_examples);
  } else {
    for (EvalSet& set : processor_->eval_sets(options_.data_dir)) {
      const size_t in_files = set.examples.size();
      keep_first(set.examples, options_.max_eval_examples);
      BERTLAB_CHECK_AS(DataError, !set.examples.empty(), "{}: no dev{} examples to evaluate in {}",
                       processor_->name(), set.suffix, options_.data_dir.string());
      log_info("data", "{}: {} eval{} examples (of {})", processor_->name(), set.examples.size(),
               set.suffix, in_files);
      eval_sets_.push_back({set.suffix, convert_examples(set.examples, labels_,
                                                         options_.max_seq_length, tokenizer)});
    }
  }
  BERTLAB_CHECK_AS(DataError, !eval_sets_.empty() && !eval_sets_[0].features.empty(),
                   "{}: no {} examples to evaluate in {}", processor_->name(), options_.eval_split,
                   options_.data_dir.string());

  log_info("data", "{}: {} train examples (of {}) and {} {} examples from {}", processor_->name(),
           train_features_.size(), train_in_files, eval_sets_[0].features.size(),
           options_.eval_split, options_.data_dir.string());
  log_info("data", "{}: max_seq_length {}, {}", processor_->name(), options_.max_seq_length,
           is_regression() ? std::string("regression") : fmt::format("{} labels", labels_.size()));
}

int64_t ClassifierTask::num_train_examples() const {
  return static_cast<int64_t>(train_features_.size());
}

std::shared_ptr<torch::nn::Module> ClassifierTask::create_model(const BertConfig& config,
                                                                bool sparse_embeddings) const {
  const int64_t outputs = is_regression() ? 1 : static_cast<int64_t>(labels_.size());
  return ClassifierModel(config, outputs, sparse_embeddings).ptr();
}

Batch ClassifierTask::make_train_batch(const std::vector<int64_t>& indices,
                                       const c10::Device& device) const {
  return collate(train_features_, indices, device, is_regression());
}

LossOutput ClassifierTask::compute_loss(torch::nn::Module& model, const Batch& batch) const {
  ClassifierModelImpl& classifier = as_classifier(model);
  const at::Tensor logits =
      classifier.forward(batch_tensor(batch, "input_ids"), batch_tensor(batch, "segment_ids"),
                         batch_tensor(batch, "input_mask"));
  const at::Tensor& label_ids = batch_tensor(batch, "label_ids");
  LossOutput out;
  out.loss = is_regression()
                 ? per_example_squared_error(logits, batch_tensor(batch, "label_values")).mean()
                 : per_example_loss(logits, label_ids).mean();
  out.num_examples = label_ids.size(0);
  return out;
}

HfModelHead ClassifierTask::hf_model_head() const {
  return {"BertForSequenceClassification", labels_,
          is_regression() ? "regression" : "single_label_classification"};
}

Metrics ClassifierTask::evaluate(torch::nn::Module& model, const EvalContext& ctx) const {
  BERTLAB_CHECK(ctx.eval_batch_size > 0, "eval_batch_size ({}) must be positive",
                ctx.eval_batch_size);
  ClassifierModelImpl& classifier = as_classifier(model);
  const EvalModeScope eval_mode(classifier);
  const at::NoGradGuard no_grad;
  Metrics metrics;
  for (const EvalFeatures& set : eval_sets_) {
    for (const auto& [key, value] : evaluate_set(classifier, set, ctx)) {
      metrics.emplace_back(key + set.suffix, value);
    }
  }
  return metrics;
}

Metrics ClassifierTask::evaluate_set(ClassifierModelImpl& classifier, const EvalFeatures& set,
                                     const EvalContext& ctx) const {
  const std::vector<InputFeatures>& features = set.features;
  const bool regression = is_regression();
  const auto total = static_cast<int64_t>(features.size());
  std::vector<int64_t> predictions;  // [eval example] argmax label id (classification)
  std::vector<int64_t> label_ids;    // [eval example]
  std::vector<double> scores;        // [eval example] predicted value (regression)
  std::vector<double> targets;       // [eval example] true value (regression)
  std::vector<double> losses;        // [eval example]
  std::string logits_tsv;            // a line of logits per eval example
  for (int64_t start = 0; start < total; start += ctx.eval_batch_size) {
    std::vector<int64_t> indices(std::min(ctx.eval_batch_size, total - start));
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = start + static_cast<int64_t>(i);
    const Batch batch = collate(features, indices, ctx.device, regression);
    const at::Tensor logits =
        classifier.forward(batch.at("input_ids"), batch.at("segment_ids"), batch.at("input_mask"));
    append_logits_tsv(logits, logits_tsv);
    if (regression) {
      append_cpu<double>(logits.squeeze(1).to(at::kDouble), scores);
      append_cpu<double>(batch.at("label_values").to(at::kDouble), targets);
      append_cpu<double>(
          per_example_squared_error(logits, batch.at("label_values")).to(at::kDouble), losses);
    } else {
      append_cpu<int64_t>(logits.argmax(/*dim=*/-1), predictions);
      append_cpu<int64_t>(batch.at("label_ids"), label_ids);
      append_cpu<double>(per_example_loss(logits, batch.at("label_ids")).to(at::kDouble), losses);
    }
  }

  if (!ctx.output_dir.empty()) {
    write_file_atomic(ctx.output_dir / fmt::format("eval_logits{}.tsv", set.suffix), logits_tsv);
  }

  Metrics metrics;
  if (regression) {
    // As Hugging Face's glue_compute_metrics for sts-b, and run_glue.py's combined_score.
    const double r = pearson(scores, targets);
    const double rho = spearman(scores, targets);
    metrics = {{"eval_loss", mean(losses)},
               {"eval_pearson", r},
               {"eval_spearmanr", rho},
               {"eval_combined_score", (r + rho) / 2.0}};
    log_info("eval", "{}: {} examples, pearson {:.4f}, spearman {:.4f}, mse {:.4f}",
             processor_->name(), total, r, rho, metrics[0].second);
    return metrics;
  }
  // As Google's metric_fn: accuracy of the argmax, and eval_loss as tf.metrics.mean of the
  // per-example losses over all examples (not a mean of batch means).
  metrics = classification_metrics(predictions, label_ids);
  metrics.insert(metrics.begin() + 1, {"eval_loss", mean(losses)});
  log_info("eval", "{}: {} examples, accuracy {:.4f}, loss {:.4f}", processor_->name(), total,
           metrics[0].second, metrics[1].second);
  return metrics;
}

Metrics ClassifierTask::classification_metrics(const std::vector<int64_t>& predictions,
                                               const std::vector<int64_t>& label_ids) const {
  const double acc = accuracy(predictions, label_ids);
  Metrics metrics = {{"eval_accuracy", acc}};
  switch (processor_->metric_set()) {
    case MetricSet::kAccuracyAndF1: {
      const double f1 = f1_score(predictions, label_ids);
      metrics.emplace_back("eval_f1", f1);
      metrics.emplace_back("eval_combined_score", (acc + f1) / 2.0);
      break;
    }
    case MetricSet::kMatthews:
      metrics.emplace_back("eval_matthews_correlation", matthews_corrcoef(predictions, label_ids));
      break;
    case MetricSet::kAccuracy:
    case MetricSet::kPearsonSpearman:
      break;
  }
  return metrics;
}

FloorMetrics ClassifierTask::floor_metrics() const {
  if (is_regression() || train_features_.empty()) return {};
  std::vector<int64_t> counts(labels_.size(), 0);
  for (const InputFeatures& f : train_features_) ++counts.at(static_cast<size_t>(f.label_id));
  const auto majority =
      static_cast<int64_t>(std::max_element(counts.begin(), counts.end()) - counts.begin());
  FloorMetrics floor{fmt::format("majority class ({})", labels_[static_cast<size_t>(majority)]),
                     {}};
  for (const EvalFeatures& set : eval_sets_) {
    std::vector<int64_t> label_ids;
    label_ids.reserve(set.features.size());
    for (const InputFeatures& f : set.features) label_ids.push_back(f.label_id);
    const std::vector<int64_t> predictions(label_ids.size(), majority);
    for (const auto& [key, value] : classification_metrics(predictions, label_ids)) {
      floor.metrics.emplace_back(key + set.suffix, value);
    }
  }
  return floor;
}

}  // namespace bertlab::classifier
