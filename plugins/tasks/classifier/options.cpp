#include "options.h"

#include "processors.h"

namespace bertlab::classifier {

std::vector<OptionDecl> classifier_option_decls() {
  OptionDecl task_name = string_option(
      "task_name", "",
      "GLUE task, as Google's run_classifier.py --task_name: mrpc, cola, mnli (dev_matched) or "
      "xnli (Chinese, multinli/ train and xnli.dev.tsv)");
  task_name.default_value.reset();  // required: no default
  task_name.one_of(supported_task_names()).mark_required();

  return {
      task_name,
      dir_option("data_dir",
                 "folder with the task's files: train.tsv and dev.tsv (mrpc, cola), train.tsv "
                 "and dev_matched.tsv (mnli), multinli/multinli.train.zh.tsv and xnli.dev.tsv "
                 "(xnli)")
          .mark_required(),
      int_option("max_seq_length", 128,
                 "tokens per example after WordPiece, counting [CLS] and [SEP]; longer pairs are "
                 "cut from the longer text, shorter ones padded; at most the model's "
                 "max_position_embeddings")
          .in_range(3, 512),
      int_option("max_train_examples", 0,
                 "use only the first N training examples in file order (small bundled runs); "
                 "0 = all")
          .at_least(0),
      int_option("max_eval_examples", 0,
                 "evaluate only the first N examples of eval_split in file order; 0 = all")
          .at_least(0),
      string_option("eval_split", "dev",
                    "what evaluate() scores: \"dev\" = the task's dev set, \"train\" = the "
                    "training examples in use (e.g. to check that a model can overfit them)")
          .one_of({"dev", "train"}),
  };
}

ClassifierOptions ClassifierOptions::from_config(const ConfigView& view) {
  ClassifierOptions options;
  options.task_name = view.get_string("task_name");
  options.data_dir = view.get_path("data_dir");
  options.max_seq_length = view.get_int("max_seq_length");
  options.max_train_examples = view.get_int("max_train_examples");
  options.max_eval_examples = view.get_int("max_eval_examples");
  options.eval_split = view.get_string("eval_split");
  return options;
}

}  // namespace bertlab::classifier
