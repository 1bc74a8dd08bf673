// Reading SQuAD JSON into examples, as run_squad.py's read_squad_examples.

#include "squad_data.h"

#include <bertlab/error.h>
#include <bertlab/log.h>
#include <fmt/format.h>

#include <string_view>
#include <unordered_set>

#include <bertlab/text/python_text.h>
#include "squad_json.h"

namespace bertlab::squad {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Skipped questions named one by one in the log; the rest only in the summary.
constexpr size_t kWarningsNamed = 10;

const char* type_name(const json& value) { return value.type_name(); }

// The member `key` of the object at `where`, of the given JSON type.
const json& member(const json& object, const char* key, json::value_t type, const fs::path& file,
                   const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) {
    throw DataError(fmt::format("{}: {} has no \"{}\", which the SQuAD format requires there",
                                file.string(), where, key));
  }
  const bool ok =
      it->type() == type || (type == json::value_t::number_integer && it->is_number_unsigned());
  if (!ok) {
    const char* wanted = type == json::value_t::array     ? "an array"
                         : type == json::value_t::object  ? "an object"
                         : type == json::value_t::string  ? "a string"
                         : type == json::value_t::boolean ? "true or false"
                                                          : "an integer";
    throw DataError(fmt::format("{}: {}.{} must be {}, found {} ({})", file.string(), where, key,
                                wanted, type_name(*it), it->dump().substr(0, 60)));
  }
  return *it;
}

// The words of a context and, per code point, the word it belongs to (-1 before the first
// word), as read_squad_examples's doc_tokens and char_to_word_offset.
struct SplitContext {
  std::vector<std::string> words;
  std::vector<int64_t> char_to_word;  // [code point] -> [word]
};

// run_squad.py's is_whitespace: fewer characters than Python's str.isspace.
bool is_squad_whitespace(char32_t c) {
  return c == U' ' || c == U'\t' || c == U'\r' || c == U'\n' || c == 0x202F;
}

SplitContext split_context(std::string_view text) {
  SplitContext out;
  out.char_to_word.reserve(text.size());
  bool prev_is_whitespace = true;
  size_t i = 0;
  while (i < text.size()) {
    const size_t begin = i;
    const char32_t c = next_code_point(text, i);
    if (is_squad_whitespace(c)) {
      prev_is_whitespace = true;
    } else {
      if (prev_is_whitespace) out.words.emplace_back();
      out.words.back().append(text.substr(begin, i - begin));
      prev_is_whitespace = false;
    }
    out.char_to_word.push_back(static_cast<int64_t>(out.words.size()) - 1);
  }
  return out;
}

std::string join_words(const std::vector<std::string>& words, int64_t first, int64_t last) {
  std::string out;
  for (int64_t w = first; w <= last; ++w) {
    if (w > first) out += ' ';
    out += words[static_cast<size_t>(w)];
  }
  return out;
}

void warn_skipped(const std::vector<std::string>& ids, const fs::path& file, const char* why) {
  if (ids.empty()) return;
  log_warning("data", "squad: {}: skipped {} question(s) {}", file.string(), ids.size(), why);
}

}  // namespace

std::vector<SquadExample> read_squad_examples(const fs::path& path, const ReadOptions& options,
                                              ReadReport* report) {
  const json root = read_json_file(path);
  if (!root.is_object()) {
    throw DataError(
        fmt::format("{}: the top level must be an object with \"data\" (SQuAD format), "
                    "found {}",
                    path.string(), type_name(root)));
  }
  const json& data = member(root, "data", json::value_t::array, path, "the file");
  ReadReport local;
  ReadReport& rep = report ? *report : local;
  rep = ReadReport{};
  std::vector<SquadExample> examples;
  std::unordered_set<std::string> seen_ids;
  for (size_t a = 0; a < data.size(); ++a) {
    const std::string article_at = fmt::format("data[{}]", a);
    if (!data[a].is_object()) {
      throw DataError(fmt::format("{}: {} must be an object with \"paragraphs\", found {}",
                                  path.string(), article_at, type_name(data[a])));
    }
    const json& paragraphs = member(data[a], "paragraphs", json::value_t::array, path, article_at);
    for (size_t p = 0; p < paragraphs.size(); ++p) {
      const std::string paragraph_at = fmt::format("{}.paragraphs[{}]", article_at, p);
      if (!paragraphs[p].is_object()) {
        throw DataError(fmt::format("{}: {} must be an object with \"context\" and \"qas\"",
                                    path.string(), paragraph_at));
      }
      const auto& context =
          member(paragraphs[p], "context", json::value_t::string, path, paragraph_at)
              .get_ref<const std::string&>();
      const json& qas = member(paragraphs[p], "qas", json::value_t::array, path, paragraph_at);
      // Shared by the paragraph's questions (Google copies the list into each example).
      const SplitContext split = split_context(context);
      // One copy of the words for all the paragraph's questions.
      const auto words = std::make_shared<const std::vector<std::string>>(split.words);
      for (size_t q = 0; q < qas.size(); ++q) {
        const std::string qa_at = fmt::format("{}.qas[{}]", paragraph_at, q);
        const json& qa = qas[q];
        if (!qa.is_object()) {
          throw DataError(fmt::format("{}: {} must be an object with \"id\" and \"question\"",
                                      path.string(), qa_at));
        }
        ++rep.questions;
        SquadExample example;
        example.qas_id = member(qa, "id", json::value_t::string, path, qa_at).get<std::string>();
        example.question_text =
            member(qa, "question", json::value_t::string, path, qa_at).get<std::string>();
        if (!seen_ids.insert(example.qas_id).second) {
          throw DataError(fmt::format(
              "{}: {}: question id \"{}\" appears twice; ids must be unique, because predictions "
              "are keyed by them",
              path.string(), qa_at, example.qas_id));
        }
        if (split.words.empty()) {
          rep.empty_context_ids.push_back(example.qas_id);
          continue;
        }
        if (options.is_training) {
          if (options.version_2_with_negative) {
            example.is_impossible =
                member(qa, "is_impossible", json::value_t::boolean, path, qa_at).get<bool>();
          }
          const json& answers = member(qa, "answers", json::value_t::array, path, qa_at);
          if (answers.size() != 1 && !example.is_impossible) {
            throw DataError(fmt::format(
                "{}: {}.answers has {} answers; for training each question needs exactly 1 (as "
                "run_squad.py){}",
                path.string(), qa_at, answers.size(),
                options.version_2_with_negative
                    ? ""
                    : "; SQuAD 2.0 data (is_impossible) needs version_2_with_negative"));
          }
          if (!example.is_impossible) {
            const std::string answer_at = qa_at + ".answers[0]";
            if (!answers[0].is_object()) {
              throw DataError(
                  fmt::format("{}: {} must be an object with \"text\" and "
                              "\"answer_start\"",
                              path.string(), answer_at));
            }
            example.orig_answer_text =
                member(answers[0], "text", json::value_t::string, path, answer_at)
                    .get<std::string>();
            const int64_t offset =
                member(answers[0], "answer_start", json::value_t::number_integer, path, answer_at)
                    .get<int64_t>();
            const auto length = static_cast<int64_t>(count_code_points(example.orig_answer_text));
            const auto context_chars = static_cast<int64_t>(split.char_to_word.size());
            if (offset < 0 || length == 0 || offset + length > context_chars) {
              if (rep.skipped_ids.size() < kWarningsNamed) {
                log_warning(
                    "data",
                    "squad: {}: {}: question {}: answer_start {} with a {}-character answer "
                    "lies outside the {}-character context; skipped",
                    path.string(), answer_at, example.qas_id, offset, length, context_chars);
              }
              rep.skipped_ids.push_back(example.qas_id);
              continue;
            }
            example.start_position = split.char_to_word[static_cast<size_t>(offset)];
            example.end_position = split.char_to_word[static_cast<size_t>(offset + length - 1)];
            // Only answers whose text is recovered from the words are kept (Google's "Could not
            // find answer"): the character offsets may disagree with the text.
            const std::string actual =
                example.start_position < 0
                    ? std::string()
                    : join_words(split.words, example.start_position, example.end_position);
            const std::string cleaned = join_python_split(example.orig_answer_text);
            if (actual.find(cleaned) == std::string::npos) {
              if (rep.skipped_ids.size() < kWarningsNamed) {
                log_warning("data",
                            "squad: {}: question {}: could not find answer '{}' in '{}'; "
                            "skipped",
                            path.string(), example.qas_id, cleaned, actual);
              }
              rep.skipped_ids.push_back(example.qas_id);
              continue;
            }
          } else {
            example.start_position = -1;
            example.end_position = -1;
          }
        }
        example.doc_tokens = words;
        examples.push_back(std::move(example));
      }
    }
  }
  warn_skipped(rep.skipped_ids, path,
               "whose answer text is not found where answer_start points (as run_squad.py)");
  warn_skipped(rep.empty_context_ids, path, "whose context is empty (nothing to answer from)");
  return examples;
}

}  // namespace bertlab::squad
