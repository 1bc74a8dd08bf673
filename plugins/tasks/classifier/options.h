#pragma once
// The [task] options of the classifier plugin.

#include <bertlab/config.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bertlab::classifier {

/// Where the examples of task_name = "tsv" | "jsonl" come from: files and columns named by the
/// experiment instead of a GLUE processor.
struct GenericFormatOptions {
  std::string train_file;               ///< under data_dir; empty: train.tsv / train.jsonl
  std::string dev_file;                 ///< under data_dir; empty: dev.tsv / dev.jsonl
  std::string text_a_column;            ///< header name or 0-based index (tsv), key (jsonl)
  std::string text_b_column;            ///< as text_a_column; empty: single-sequence task
  std::string label_column;             ///< as text_a_column
  std::vector<std::string> label_list;  ///< [label id] label strings; empty for regression
  bool regression = false;              ///< a 1-output head with MSE loss on a numeric label
  bool header = true;                   ///< tsv: the first line names the columns
};

struct ClassifierOptions {
  std::string task_name;           ///< canonical name: cola, sst2, mrpc, stsb, qqp, mnli, ...
  std::filesystem::path data_dir;  ///< folder with the task's files
  int64_t max_seq_length = 128;    ///< tokens per example after WordPiece, [CLS] and [SEP]s
  int64_t max_train_examples = 0;  ///< first N training examples in file order; 0 = all
  int64_t max_eval_examples = 0;   ///< first N examples of each evaluation set; 0 = all
  std::string eval_split = "dev";  ///< "dev": the dev set(s); "train": the training examples
  bool trec_fine = false;          ///< trec: the 50 fine labels instead of the 6 coarse ones
  GenericFormatOptions generic;    ///< used when task_name is "tsv" or "jsonl"

  /// Reads every option once from a validated view and checks the rules between keys (the
  /// generic-format keys belong to tsv/jsonl only; a generic task needs its columns and either
  /// a label_list or regression). Throws ConfigError naming the key.
  static ClassifierOptions from_config(const ConfigView& view);
};

/// True for task_name "tsv" and "jsonl".
bool is_generic_format(const std::string& task_name);

/// Splits a label_list ("neg,pos") at commas, trimming spaces around each label. Throws
/// ConfigError for an empty label, a duplicate, or fewer than two labels.
std::vector<std::string> parse_label_list(const std::string& text);

/// The declarations of the options (validation and `bertlab plugins --describe classifier`).
std::vector<OptionDecl> classifier_option_decls();

}  // namespace bertlab::classifier
