#pragma once
// The official SQuAD metrics: evaluate-v1.1.py and evaluate-v2.0.py.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bertlab::squad {

/// question id → predicted answer text ("" = no answer).
using AnswerMap = std::map<std::string, std::string>;
/// question id → probability (or score) of "no answer", in the null-odds file's order (the
/// official best-threshold sweep breaks ties by it).
using NullOddsMap = std::vector<std::pair<std::string, double>>;

/// The official normalization: lower-case, remove ASCII punctuation, the articles a|an|the as
/// whole words, and collapse whitespace.
std::string normalize_answer(const std::string& text);

// The implicit move of nlohmann::json is noexcept; clang-tidy follows a throw in its debug
// invariant check.
struct EvalResult {  // NOLINT(bugprone-exception-escape)
  /// Exactly the keys and values (percent) the official script prints, in its order.
  nlohmann::ordered_json metrics;
  int64_t missing = 0;  ///< questions without a prediction (scored 0)
};

/// evaluate-v1.1.py on the dataset's "data" array.
EvalResult evaluate_v1(const nlohmann::json& data, const AnswerMap& predictions);

/// evaluate-v2.0.py on the dataset's "data" array; with null odds also best_exact/best_f1 and
/// their thresholds. A question predicted as no-answer when its null odds > na_prob_thresh.
EvalResult evaluate_v2(const nlohmann::json& data, const AnswerMap& predictions,
                       const std::optional<NullOddsMap>& null_odds, double na_prob_thresh = 1.0);

/// "1.1" or "v2.0" style: true when the dataset is SQuAD 2.0 (its "version" says so, or a
/// question has "is_impossible").
bool is_squad_v2(const nlohmann::json& dataset);

}  // namespace bertlab::squad
