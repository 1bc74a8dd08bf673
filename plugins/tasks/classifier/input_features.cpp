#include "input_features.h"

#include <bertlab/error.h>
#include <bertlab/log.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

namespace bertlab::classifier {

namespace {

// Like run_classifier.py, show the first few converted examples (at debug level).
constexpr size_t kExamplesToLog = 5;

void log_example(const InputExample& example, const InputFeatures& features,
                 const FullTokenizer& tokenizer) {
  const auto length = std::count(features.input_mask.begin(), features.input_mask.end(), 1);
  const std::vector<int64_t> ids(features.input_ids.begin(), features.input_ids.begin() + length);
  log_debug("data", "example {}: label {} (id {}), {} tokens: {}", example.guid, example.label,
            features.label_id, length, fmt::join(tokenizer.convert_ids_to_tokens(ids), " "));
}

}  // namespace

void truncate_seq_pair(std::vector<std::string>& tokens_a, std::vector<std::string>& tokens_b,
                       size_t max_length) {
  while (tokens_a.size() + tokens_b.size() > max_length) {
    if (tokens_a.size() > tokens_b.size()) {
      tokens_a.pop_back();
    } else {
      tokens_b.pop_back();
    }
  }
}

PackedTokens pack_tokens(std::vector<std::string> tokens_a, std::vector<std::string> tokens_b,
                         int64_t max_seq_length) {
  BERTLAB_CHECK(max_seq_length >= 3, "max_seq_length ({}) must be at least 3", max_seq_length);
  const auto max_length = static_cast<size_t>(max_seq_length);
  const bool pair = !tokens_b.empty();
  if (pair) {
    truncate_seq_pair(tokens_a, tokens_b, max_length - 3);  // room for [CLS], [SEP], [SEP]
  } else if (tokens_a.size() > max_length - 2) {
    tokens_a.resize(max_length - 2);  // room for [CLS], [SEP]
  }
  PackedTokens packed;
  packed.tokens.reserve(tokens_a.size() + tokens_b.size() + 3);
  packed.tokens.emplace_back("[CLS]");
  packed.tokens.insert(packed.tokens.end(), tokens_a.begin(), tokens_a.end());
  packed.tokens.emplace_back("[SEP]");
  packed.segment_ids.assign(packed.tokens.size(), 0);
  if (pair) {
    packed.tokens.insert(packed.tokens.end(), tokens_b.begin(), tokens_b.end());
    packed.tokens.emplace_back("[SEP]");
    packed.segment_ids.resize(packed.tokens.size(), 1);
  }
  return packed;
}

InputFeatures convert_single_example(const InputExample& example,
                                     const std::vector<std::string>& labels, int64_t max_seq_length,
                                     const FullTokenizer& tokenizer) {
  // Regression (no labels, as Hugging Face's output_mode "regression"): the label is a number.
  int64_t label_id = 0;
  float label_value = 0.0F;
  if (labels.empty()) {
    const std::optional<double> score = parse_score(example.label);
    BERTLAB_CHECK_AS(DataError, score.has_value(),
                     "example {}: label \"{}\" is not a number; a regression task expects one",
                     example.guid, example.label);
    label_value = static_cast<float>(*score);
  } else {
    const auto label = std::find(labels.begin(), labels.end(), example.label);
    BERTLAB_CHECK_AS(DataError, label != labels.end(),
                     "example {}: unknown label \"{}\"; expected one of {}", example.guid,
                     example.label, fmt::join(labels, "|"));
    label_id = label - labels.begin();
  }
  // Google tokenizes text_b only when it is a non-empty string.
  std::vector<std::string> tokens_b;
  if (!example.text_b.empty()) tokens_b = tokenizer.tokenize(example.text_b);
  const PackedTokens packed =
      pack_tokens(tokenizer.tokenize(example.text_a), std::move(tokens_b), max_seq_length);

  InputFeatures features;
  features.input_ids = tokenizer.convert_tokens_to_ids(packed.tokens);
  features.input_mask.assign(features.input_ids.size(), 1);
  features.segment_ids = packed.segment_ids;
  const auto length = static_cast<size_t>(max_seq_length);
  features.input_ids.resize(length, 0);
  features.input_mask.resize(length, 0);
  features.segment_ids.resize(length, 0);
  features.label_id = label_id;
  features.label_value = label_value;
  return features;
}

std::vector<InputFeatures> convert_examples(const std::vector<InputExample>& examples,
                                            const std::vector<std::string>& labels,
                                            int64_t max_seq_length,
                                            const FullTokenizer& tokenizer) {
  std::vector<InputFeatures> features;
  features.reserve(examples.size());
  for (const InputExample& example : examples) {
    features.push_back(convert_single_example(example, labels, max_seq_length, tokenizer));
    if (features.size() <= kExamplesToLog) log_example(example, features.back(), tokenizer);
  }
  return features;
}

}  // namespace bertlab::classifier
