#include "squad_options.h"

namespace bertlab::squad {

std::vector<OptionDecl> squad_option_decls() {
  return {
      path_option("train_file",
                  "SQuAD JSON for training, .json or .json.zip (run_squad.py --train_file); "
                  "required when [train] do_train"),
      path_option("predict_file",
                  "SQuAD JSON to predict and score with the official metrics (--predict_file); "
                  "required when [train] do_eval"),
      bool_option("version_2_with_negative", false,
                  "SQuAD 2.0: questions may have no answer; adds null_odds.json and the "
                  "HasAns/NoAns metrics"),
      int_option("max_seq_length", 384,
                 "tokens per window, counting [CLS] and two [SEP]; at most the model's "
                 "max_position_embeddings")
          .in_range(8, 512),
      int_option("doc_stride", 128, "tokens between the starts of consecutive document windows")
          .at_least(1),
      int_option("max_query_length", 64, "question tokens kept; longer questions are cut")
          .at_least(1),
      int_option("n_best_size", 20, "n-best candidates per question in nbest_predictions.json")
          .at_least(1),
      int_option("max_answer_length", 30, "longest answer in WordPiece tokens").at_least(1),
      float_option("null_score_diff_threshold", 0.0,
                   "v2: predict no answer when the null score exceeds the best span's by more "
                   "than this"),
      int_option("max_train_examples", 0,
                 "use only the first N training questions in file order; 0 = all")
          .at_least(0),
      int_option("max_eval_examples", 0,
                 "predict and score only the first N questions of predict_file; 0 = all")
          .at_least(0),
  };
}

SquadOptions SquadOptions::from_config(const ConfigView& view) {
  SquadOptions options;
  options.train_file = view.get_path("train_file");
  options.predict_file = view.get_path("predict_file");
  options.version_2_with_negative = view.get_bool("version_2_with_negative");
  options.max_seq_length = view.get_int("max_seq_length");
  options.doc_stride = view.get_int("doc_stride");
  options.max_query_length = view.get_int("max_query_length");
  options.n_best_size = view.get_int("n_best_size");
  options.max_answer_length = view.get_int("max_answer_length");
  options.null_score_diff_threshold = view.get_float("null_score_diff_threshold");
  options.max_train_examples = view.get_int("max_train_examples");
  options.max_eval_examples = view.get_int("max_eval_examples");
  return options;
}

}  // namespace bertlab::squad
