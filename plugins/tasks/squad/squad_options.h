#pragma once
// The [task] options of the squad plugin. Names follow run_squad.py's flags.

#include <bertlab/config.h>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace bertlab::squad {

struct SquadOptions {
  std::filesystem::path train_file;        ///< SQuAD JSON for training (.json or .json.zip)
  std::filesystem::path predict_file;      ///< SQuAD JSON to predict and score
  bool version_2_with_negative = false;    ///< SQuAD 2.0: questions may have no answer
  int64_t max_seq_length = 384;            ///< tokens per window
  int64_t doc_stride = 128;                ///< tokens between window starts
  int64_t max_query_length = 64;           ///< question tokens kept
  int64_t n_best_size = 20;                ///< n-best candidates per question
  int64_t max_answer_length = 30;          ///< longest answer in tokens
  double null_score_diff_threshold = 0.0;  ///< v2: predict "" when null − best > this
  int64_t max_train_examples = 0;          ///< first N training questions in file order; 0 = all
  int64_t max_eval_examples = 0;           ///< first N predict_file questions; 0 = all

  /// Reads every option once from a validated view.
  static SquadOptions from_config(const ConfigView& view);
};

/// The declarations of the options (validation and `bertlab plugins --describe squad`).
std::vector<OptionDecl> squad_option_decls();

}  // namespace bertlab::squad
