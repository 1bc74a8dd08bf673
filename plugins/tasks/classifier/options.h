#pragma once
// The [task] options of the classifier plugin.

#include <bertlab/config.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bertlab::classifier {

struct ClassifierOptions {
  std::string task_name;           ///< mrpc | cola | mnli | xnli (run_classifier.py's processors)
  std::filesystem::path data_dir;  ///< folder with the task's .tsv files
  int64_t max_seq_length = 128;    ///< tokens per example after WordPiece, [CLS] and [SEP]s
  int64_t max_train_examples = 0;  ///< first N training examples in file order; 0 = all
  int64_t max_eval_examples = 0;   ///< first N evaluation examples in file order; 0 = all
  std::string eval_split = "dev";  ///< "dev": the dev set; "train": the training examples

  /// Reads every option once from a validated view.
  static ClassifierOptions from_config(const ConfigView& view);
};

/// The declarations of the options (validation and `bertlab plugins --describe classifier`).
std::vector<OptionDecl> classifier_option_decls();

}  // namespace bertlab::classifier
