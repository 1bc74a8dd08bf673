#include "options.h"

#include <bertlab/error.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "processors.h"

namespace bertlab::classifier {

namespace {

/// The keys that only task_name = "tsv" | "jsonl" reads.
const std::vector<std::string> kGenericKeys = {"train_file",    "dev_file",     "text_a_column",
                                               "text_b_column", "label_column", "label_list",
                                               "regression",    "header"};

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const size_t last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

bool is_index(const std::string& column) {
  constexpr size_t kMaxDigits = 6;  // no TSV has a million columns; keeps stoul in range
  return !column.empty() && column.size() <= kMaxDigits &&
         std::all_of(column.begin(), column.end(), [](unsigned char c) { return std::isdigit(c); });
}

/// Checks the rules between the generic-format keys of `task_name` (tsv or jsonl).
void check_generic(const std::string& task_name, const GenericFormatOptions& g,
                   const ConfigView& view) {
  BERTLAB_CHECK_AS(ConfigError, !g.text_a_column.empty(),
                   "task.text_a_column: task_name = \"{}\" needs the column of the first text "
                   "(a header name or 0-based index for tsv, a key for jsonl)",
                   task_name);
  BERTLAB_CHECK_AS(ConfigError, !g.label_column.empty(),
                   "task.label_column: task_name = \"{}\" needs the column of the label",
                   task_name);
  BERTLAB_CHECK_AS(ConfigError, g.regression || !g.label_list.empty(),
                   "task.label_list: task_name = \"{}\" needs the labels, comma-separated (e.g. "
                   "label_list = \"negative,positive\"; a label's id is its position), or "
                   "regression = true for a numeric label",
                   task_name);
  BERTLAB_CHECK_AS(ConfigError, !(g.regression && !g.label_list.empty()),
                   "task.label_list: \"{}\" is set together with regression = true; a regression "
                   "task has no labels, remove one of the two",
                   view.get_string("label_list"));
  BERTLAB_CHECK_AS(ConfigError, !(task_name == "jsonl" && view.has("header")),
                   "task.header: only task_name = \"tsv\" has a header option (a jsonl line is "
                   "an object with named keys); remove it");
  if (task_name == "tsv" && !g.header) {
    for (const char* key : {"text_a_column", "text_b_column", "label_column"}) {
      const std::string column = view.get_string(key);
      BERTLAB_CHECK_AS(ConfigError, column.empty() || is_index(column),
                       "task.{}: \"{}\" is not a column index; with header = false the columns "
                       "are named by their 0-based index (e.g. \"0\")",
                       key, column);
    }
  }
}

}  // namespace

bool is_generic_format(const std::string& task_name) {
  return task_name == "tsv" || task_name == "jsonl";
}

std::vector<std::string> parse_label_list(const std::string& text) {
  std::vector<std::string> labels;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string label = trim(text.substr(start, comma - start));
    BERTLAB_CHECK_AS(ConfigError, !label.empty(),
                     "task.label_list: \"{}\" has an empty label; write the labels separated by "
                     "commas, e.g. \"negative,positive\"",
                     text);
    BERTLAB_CHECK_AS(ConfigError, std::find(labels.begin(), labels.end(), label) == labels.end(),
                     "task.label_list: \"{}\" names label \"{}\" twice; each label once", text,
                     label);
    labels.push_back(label);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  BERTLAB_CHECK_AS(ConfigError, labels.size() >= 2,
                   "task.label_list: \"{}\" has {} label; a classifier needs at least 2 (for a "
                   "numeric label set regression = true instead)",
                   text, labels.size());
  return labels;
}

std::vector<OptionDecl> classifier_option_decls() {
  OptionDecl task_name = string_option(
      "task_name", "",
      "GLUE task by Hugging Face's name: cola, sst2 (alias sst-2), mrpc, stsb (alias sts-b), "
      "qqp, mnli (dev_matched and dev_mismatched), qnli, rte, wnli; Google's xnli (Chinese); "
      "trec (TREC question classification, Hugging Face's labels); or a generic format, tsv "
      "or jsonl, read as the generic-format keys say");
  task_name.default_value.reset();  // required: no default
  task_name.one_of(supported_task_names()).mark_required();

  return {
      task_name,
      dir_option("data_dir",
                 "folder with the task's files: train.tsv and dev.tsv (most GLUE tasks), "
                 "train.tsv, dev_matched.tsv and dev_mismatched.tsv (mnli), "
                 "multinli/multinli.train.zh.tsv and xnli.dev.tsv (xnli), train_5500.label and "
                 "TREC_10.label (trec), train_file and dev_file (tsv, jsonl)")
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
                 "evaluate only the first N examples of each evaluation set in file order; "
                 "0 = all")
          .at_least(0),
      string_option("trec_labels", "coarse",
                    "trec: the 6 coarse classes (coarse_label) or the 50 fine ones (fine_label)")
          .one_of({"coarse", "fine"}),
      string_option("eval_split", "dev",
                    "what evaluate() scores: \"dev\" = the task's dev set(s), \"train\" = the "
                    "training examples in use (e.g. to check that a model can overfit them)")
          .one_of({"dev", "train"}),
      string_option("train_file", "",
                    "tsv/jsonl: training file under data_dir; empty = train.tsv or train.jsonl"),
      string_option("dev_file", "",
                    "tsv/jsonl: evaluation file under data_dir; empty = dev.tsv or dev.jsonl"),
      string_option("text_a_column", "",
                    "tsv/jsonl (required): column of the first text: a header name or 0-based "
                    "index (tsv), a key (jsonl)"),
      string_option("text_b_column", "",
                    "tsv/jsonl: column of the second text of a pair; empty = single sentences"),
      string_option("label_column", "", "tsv/jsonl (required): column of the label"),
      string_option("label_list", "",
                    "tsv/jsonl: the labels, comma-separated (\"negative,positive\"); a label's id "
                    "is its position; required unless regression = true"),
      bool_option("regression", false,
                  "tsv/jsonl: the label is a number; a 1-output head with mean squared error "
                  "loss, scored by Pearson and Spearman correlation"),
      bool_option("header", true,
                  "tsv: the first line names the columns (false: columns are 0-based indices)"),
  };
}

ClassifierOptions ClassifierOptions::from_config(const ConfigView& view) {
  ClassifierOptions options;
  options.task_name = canonical_task_name(view.get_string("task_name"));
  options.data_dir = view.get_path("data_dir");
  options.max_seq_length = view.get_int("max_seq_length");
  options.max_train_examples = view.get_int("max_train_examples");
  options.max_eval_examples = view.get_int("max_eval_examples");
  options.eval_split = view.get_string("eval_split");
  options.trec_fine = view.get_string("trec_labels") == "fine";
  BERTLAB_CHECK_AS(ConfigError, options.task_name == "trec" || !view.has("trec_labels"),
                   "task.trec_labels: only used with task_name = \"trec\", but task_name is "
                   "\"{}\"; remove the key",
                   options.task_name);

  const bool generic = is_generic_format(options.task_name);
  if (!generic) {
    for (const std::string& key : kGenericKeys) {
      BERTLAB_CHECK_AS(ConfigError, !view.has(key),
                       "task.{}: only used with task_name = \"tsv\" or \"jsonl\", but task_name "
                       "is \"{}\" (whose files and columns are fixed); remove the key",
                       key, options.task_name);
    }
    return options;
  }
  GenericFormatOptions& g = options.generic;
  const std::string extension = options.task_name;  // "tsv" or "jsonl"
  g.train_file = view.get_string("train_file");
  if (g.train_file.empty()) g.train_file = "train." + extension;
  g.dev_file = view.get_string("dev_file");
  if (g.dev_file.empty()) g.dev_file = "dev." + extension;
  g.text_a_column = view.get_string("text_a_column");
  g.text_b_column = view.get_string("text_b_column");
  g.label_column = view.get_string("label_column");
  const std::string label_list = view.get_string("label_list");
  if (!label_list.empty()) g.label_list = parse_label_list(label_list);
  g.regression = view.get_bool("regression");
  g.header = view.get_bool("header");
  check_generic(options.task_name, g, view);
  return options;
}

}  // namespace bertlab::classifier
