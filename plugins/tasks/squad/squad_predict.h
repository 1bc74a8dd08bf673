#pragma once
// Answers from start/end logits, as run_squad.py's write_predictions and get_final_text.

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "squad_data.h"
#include "squad_features.h"

namespace bertlab::squad {

/// The model's logits for one feature, as run_squad.py's RawResult.
struct RawResult {
  int64_t unique_id = 0;
  std::vector<float> start_logits;  ///< [token position], max_seq_length of them
  std::vector<float> end_logits;    ///< [token position]
};

struct PredictionOptions {
  int64_t n_best_size = 20;        ///< candidates kept per example (start and end each, then spans)
  int64_t max_answer_length = 30;  ///< longest answer in tokens
  bool do_lower_case = true;       ///< as the tokenizer; get_final_text needs it
  bool version_2_with_negative = false;    ///< consider the null answer
  double null_score_diff_threshold = 0.0;  ///< v2: predict "" when null − best non-null > this
};

/// One entry of nbest_predictions.json.
struct NbestEntry {
  std::string text;
  double probability = 0.0;  ///< softmax over the n-best's start+end logit sums
  double start_logit = 0.0;
  double end_logit = 0.0;
};

/// What write_predictions writes, keyed by question id, in example order.
struct SquadPredictions {
  std::vector<std::pair<std::string, std::string>> answers;            ///< predictions.json
  std::vector<std::pair<std::string, std::vector<NbestEntry>>> nbest;  ///< nbest_predictions.json
  std::vector<std::pair<std::string, double>> null_odds;               ///< v2 only: null_odds.json
                                                          ///< (null score − best non-null score)
};

/// Predictions of every example from the results of its features (matched by unique_id).
/// Throws Error naming the unique_id when a feature has no result.
SquadPredictions make_predictions(const std::vector<SquadExample>& examples,
                                  const std::vector<SquadFeature>& features,
                                  const std::vector<RawResult>& results,
                                  const PredictionOptions& options);

/// Writes predictions.json, nbest_predictions.json and (v2) null_odds.json into `dir`, each to a
/// temporary file renamed into place, formatted as run_squad.py does (json.dumps, indent 4).
void write_prediction_files(const SquadPredictions& predictions, const std::filesystem::path& dir,
                            bool version_2_with_negative);

/// run_squad.py's get_final_text: maps the detokenized prediction `pred_text` back onto the
/// original words `orig_text`; falls back to `pred_text` where the alignment fails.
std::string get_final_text(const std::string& pred_text, const std::string& orig_text,
                           bool do_lower_case);

}  // namespace bertlab::squad
