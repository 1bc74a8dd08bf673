#pragma once
// SQuAD v1.1 / v2.0 examples, read as run_squad.py's read_squad_examples.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace bertlab::squad {

/// One question on one context, as run_squad.py's SquadExample.
struct SquadExample {
  std::string qas_id;         ///< the question's "id"
  std::string question_text;  ///< the question, as written
  /// [word] the context split on whitespace (Google's is_whitespace: space, \t, \r, \n,
  /// U+202F); shared by the questions of one paragraph.
  std::shared_ptr<const std::vector<std::string>> doc_tokens;
  std::string orig_answer_text;  ///< training only: the answer's text; "" otherwise
  int64_t start_position = -1;   ///< training only: [word] of the answer's first character
  int64_t end_position = -1;     ///< training only: [word] of the answer's last character
  bool is_impossible = false;    ///< v2 (version_2_with_negative) and "is_impossible": true
};

struct ReadOptions {
  bool is_training = false;              ///< locate answers; each question needs exactly one
  bool version_2_with_negative = false;  ///< read "is_impossible"
};

/// What reading found besides the examples.
struct ReadReport {
  int64_t questions = 0;  ///< questions in the file
  /// Training: questions skipped because the answer text is not found where answer_start
  /// points (Google's "Could not find answer" warning) or answer_start lies outside the context.
  std::vector<std::string> skipped_ids;
  /// Questions skipped because their context has no words (nothing to predict from).
  std::vector<std::string> empty_context_ids;
};

/// Reads a SQuAD JSON file (plain or .json.zip) into examples in file order. Throws DataError
/// naming the file and the JSON path (e.g. data[3].paragraphs[0].qas[2].answers) for a
/// missing or mistyped field, a question id seen twice, or (training) a question without
/// exactly one answer (as run_squad.py). Skipped questions are logged with their id and
/// recorded in `report`.
std::vector<SquadExample> read_squad_examples(const std::filesystem::path& path,
                                              const ReadOptions& options,
                                              ReadReport* report = nullptr);

}  // namespace bertlab::squad
