// SQuAD reading and features: Google's outputs (oracle fixtures) through the real executable,
// hand-derived windows, max-context, improved spans and impossible answers, and bad input.

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "squad_data.h"
#include "squad_features.h"
#include "test_util.h"

namespace bertlab::squad {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;
using testing::write_file;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string vocab_file() { return data_path("vocab/bert-base-uncased/vocab.txt").string(); }

// `bertlab squad features` prints byte for byte what Google's run_squad.py computes (the
// fixtures are the oracle's output; tests/data/squad/README.md gives its flags).
void expect_oracle_output(const std::string& input, const std::vector<std::string>& flags,
                          const std::string& fixture) {
  std::vector<std::string> args = {"squad",      "features", "--vocab_file",
                                   vocab_file(), "--input",  data_path("squad/" + input).string()};
  args.insert(args.end(), flags.begin(), flags.end());
  const auto result = run_bertlab(args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto expected = lines_of(read_file(data_path("squad/features/" + fixture)));
  const auto got = lines_of(result.out);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "line " << i + 1;
}

TEST(SquadFeatures, DevSampleAsGoogle) {
  expect_oracle_output("dev-sample.json", {}, "dev-sample.jsonl");
}

TEST(SquadFeatures, TrainingV2WithManyWindowsAsGoogle) {
  expect_oracle_output("normans-3-train-v2.0.json",
                       {"--training", "--version_2_with_negative", "--max_seq_length=64",
                        "--doc_stride", "16", "--max_query_length", "12"},
                       "normans-3-train-v2.0.seq64.jsonl");
}

TEST(SquadFeatures, CasedShortWindowsAsGoogle) {
  expect_oracle_output("train-sample.json",
                       {"--training", "--max_seq_length", "48", "--doc_stride", "8",
                        "--max_query_length", "8", "--do_lower_case=false"},
                       "train-sample.seq48.cased.jsonl");
}

TEST(SquadFeatures, WholeDevV2AsGoogle) {
  const auto result = run_bertlab({"squad", "features", "--vocab_file", vocab_file(), "--input",
                                   data_path("squad/dev-v2.0.json.zip").string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto got = lines_of(result.out);
  const auto expected =
      lines_of(read_file(data_path("squad/features/dev-v2.0.first20-last20.jsonl")));
  ASSERT_EQ(expected.size(), 40U);
  ASSERT_EQ(got.size(), 12232U);  // Google's feature count for dev-v2.0 at 384/128/64
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(got[i], expected[i]) << "line " << i + 1;
    EXPECT_EQ(got[got.size() - 20 + i], expected[20 + i]) << "line " << got.size() - 19 + i;
  }
}

// The direct JSON writer gives the general encoding's lines (nlohmann's document written as
// json.dumps) for every feature of dev-v1.1, of a training set with many windows (unique ids of
// several digits within an example) and of a cased vocabulary's odd characters.
TEST(SquadFeatures, DirectWriterEqualsTheGeneralEncoding) {
  const FullTokenizer uncased(vocab_file(), true);
  const FullTokenizer cased(vocab_file(), false);
  struct Case {
    const char* file;
    bool training;
    bool v2;
    FeatureOptions options;
    const FullTokenizer* tokenizer;
  };
  const Case cases[] = {
      {"dev-v1.1.json.zip", false, false, {384, 128, 64, false}, &uncased},
      {"dev-v1.1.json.zip", false, false, {64, 16, 12, false}, &cased},
      {"normans-3-train-v2.0.json", true, true, {64, 16, 12, true}, &uncased},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const auto examples =
        read_squad_examples(data_path(std::string("squad/") + c.file), {c.training, c.v2});
    const auto features = convert_examples_to_features(examples, *c.tokenizer, c.options);
    ASSERT_GE(features.size(), 200U);
    std::string direct;
    for (size_t i = 0; i < features.size(); ++i) {
      direct.clear();
      append_feature_json_line(direct, features[i], c.training);
      ASSERT_EQ(direct, feature_to_json_line(features[i], c.training) + "\n") << "feature " << i;
    }
  }
}

TEST(SquadFeatures, TheOutputIsTheSameOnAnyNumberOfThreads) {
  const auto run = [](const std::string& threads) {
    return run_bertlab({"squad", "features", "--vocab_file", vocab_file(), "--input",
                        data_path("squad/normans-3-train-v2.0.json").string(), "--training",
                        "--version_2_with_negative", "--max_seq_length=64", "--doc_stride=16",
                        "--max_query_length=12", "--threads=" + threads});
  };
  const auto one = run("1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  for (const char* threads : {"2", "5"}) {
    const auto many = run(threads);
    ASSERT_EQ(many.exit_code, 0) << many.err;
    EXPECT_TRUE(many.out == one.out) << threads << " threads";
  }
  EXPECT_NE(one.err.find("features and JSON"), std::string::npos) << one.err;
  // A host flag sends the command to bertlab-host, which runs the squad plugin's tool.
  const auto host =
      run_bertlab({"squad", "features", "--vocab_file", vocab_file(), "--input",
                   data_path("squad/normans-3-train-v2.0.json").string(), "--training",
                   "--version_2_with_negative", "--max_seq_length=64", "--doc_stride=16",
                   "--max_query_length=12", "--allow-insecure-plugins"});
  ASSERT_EQ(host.exit_code, 0) << host.err;
  EXPECT_TRUE(host.out == one.out);
}

// A vocabulary of whole words, so that every word is one piece and positions are easy to
// derive by hand.
FullTokenizer word_tokenizer() {
  std::vector<std::string> tokens = {
      "[PAD]", "[UNK]", "[CLS]", "[SEP]",  "what", "year",   "?",  "the",  "man",    "went",
      "to",    "store", "and",   "bought", "a",    "gallon", "of", "milk", "leader", "was",
      "john",  "smith", "(",     "1895",   "-",    "1943",   ")",  "."};
  return FullTokenizer(std::make_shared<const Vocab>(Vocab::from_tokens(tokens)), true);
}

fs::path write_squad(const TempDir& dir, const std::string& context, const std::string& qas) {
  const fs::path path = dir / "data.json";
  write_file(path, R"({"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": )" +
                       nlohmann::json(context).dump() + R"(, "qas": [)" + qas + "]}]}]}");
  return path;
}

const char* kStoreContext = "the man went to the store and bought a gallon of milk";

TEST(SquadFeatures, WindowsAndMaxContextByHand) {
  TempDir dir;
  // "milk" is word 11, at character 49.
  const auto path = write_squad(
      dir, kStoreContext,
      R"({"id": "q", "question": "what", "answers": [{"text": "milk", "answer_start": 49}]})");
  const auto examples = read_squad_examples(path, {true, false});
  ASSERT_EQ(examples.size(), 1U);
  EXPECT_EQ(examples[0].doc_tokens->size(), 12U);
  EXPECT_EQ(examples[0].start_position, 11);
  EXPECT_EQ(examples[0].end_position, 11);
  // 9 positions − [CLS] what [SEP] … [SEP] leaves 5 document tokens per window; stride 3:
  // windows start at 0, 3, 6 and 9 (the last has the 3 remaining tokens).
  FeatureOptions options;
  options.max_seq_length = 9;
  options.doc_stride = 3;
  options.max_query_length = 64;
  options.is_training = true;
  const auto features = convert_examples_to_features(examples, word_tokenizer(), options);
  ASSERT_EQ(features.size(), 4U);
  const std::vector<int> starts = {0, 3, 6, 9};
  for (size_t s = 0; s < 4; ++s) {
    SCOPED_TRACE(s);
    const auto& f = features[s];
    EXPECT_EQ(f.unique_id, kFirstUniqueId + static_cast<int64_t>(s));
    EXPECT_EQ(f.doc_span_index, static_cast<int64_t>(s));
    EXPECT_EQ(f.tokens.front(), "[CLS]");
    EXPECT_EQ(f.tokens[1], "what");
    EXPECT_EQ(f.tokens[2], "[SEP]");
    EXPECT_EQ(f.tokens.back(), "[SEP]");
    EXPECT_EQ(f.token_to_orig[3], starts[s]);  // the window's first word
    EXPECT_EQ(f.input_ids.size(), 9U);
    EXPECT_EQ(f.segment_ids[2], 0);
    EXPECT_EQ(f.segment_ids[3], 1);
  }
  EXPECT_EQ(features[3].tokens.size(), 7U);  // 3 + 3 words + [SEP]; then padding
  EXPECT_EQ(features[3].input_mask[6], 1);
  EXPECT_EQ(features[3].input_mask[7], 0);
  EXPECT_EQ(features[3].input_ids[8], 0);
  // Word 3 ("to"): window 0 gives min(3 left, 1 right) = 1 (+0.05), window 1 gives 0 (+0.05).
  EXPECT_EQ(features[0].token_is_max_context[3 + 3], 1);
  EXPECT_EQ(features[1].token_is_max_context[3 + 0], 0);
  // Word 4 ("the"): window 0 gives 0, window 1 gives min(1, 3) = 1.
  EXPECT_EQ(features[0].token_is_max_context[3 + 4], 0);
  EXPECT_EQ(features[1].token_is_max_context[3 + 1], 1);
  // Word 10 ("of"): window 2 gives min(4, 0) = 0 (+0.05), window 3 min(1, 1) = 1 (+0.03).
  EXPECT_EQ(features[2].token_is_max_context[3 + 4], 0);
  EXPECT_EQ(features[3].token_is_max_context[3 + 1], 1);
  // "milk" is only in the last window, at its third document position; elsewhere (0, 0).
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(features[s].start_position, 0);
    EXPECT_EQ(features[s].end_position, 0);
  }
  EXPECT_EQ(features[3].start_position, 3 + 2);
  EXPECT_EQ(features[3].end_position, 3 + 2);
  EXPECT_EQ(features[3].tokens[5], "milk");
}

TEST(SquadFeatures, ImprovedAnswerSpanByHand) {
  TempDir dir;
  // The annotated answer "1895" lies inside the word "(1895-1943)." (word 5, characters 26-37);
  // the word's pieces are ( 1895 - 1943 ) . and the improved span is the piece 1895 alone.
  const auto path = write_squad(
      dir, "The leader was John Smith (1895-1943).",
      R"({"id": "q", "question": "What year?", "answers": [{"text": "1895", "answer_start": 27}]})");
  const auto examples = read_squad_examples(path, {true, false});
  ASSERT_EQ(examples.size(), 1U);
  EXPECT_EQ(examples[0].start_position, 5);
  EXPECT_EQ(examples[0].end_position, 5);
  FeatureOptions options;
  options.max_seq_length = 32;
  options.is_training = true;
  const auto features = convert_examples_to_features(examples, word_tokenizer(), options);
  ASSERT_EQ(features.size(), 1U);
  // [CLS] what year ? [SEP] = 5 positions; piece 6 ("1895") sits at 5 + 6 = 11.
  EXPECT_EQ(features[0].start_position, 11);
  EXPECT_EQ(features[0].end_position, 11);
  EXPECT_EQ(features[0].tokens[11], "1895");
  EXPECT_EQ(features[0].token_to_orig[11], 5);
}

TEST(SquadFeatures, ImpossibleAnswersPointAtCls) {
  TempDir dir;
  const auto path =
      write_squad(dir, kStoreContext,
                  R"({"id": "q", "question": "what year", "answers": [], "is_impossible": true,
                      "plausible_answers": [{"text": "milk", "answer_start": 49}]})");
  const auto examples = read_squad_examples(path, {true, true});
  ASSERT_EQ(examples.size(), 1U);
  EXPECT_TRUE(examples[0].is_impossible);
  EXPECT_EQ(examples[0].start_position, -1);
  FeatureOptions options;
  options.max_seq_length = 10;
  options.doc_stride = 4;
  options.is_training = true;
  const auto features = convert_examples_to_features(examples, word_tokenizer(), options);
  ASSERT_EQ(features.size(), 3U);  // 5 document tokens per window: starts 0, 4, 8
  for (const auto& f : features) {
    EXPECT_TRUE(f.is_impossible);
    EXPECT_EQ(f.start_position, 0);
    EXPECT_EQ(f.end_position, 0);
  }
  // Without version_2_with_negative, training needs exactly one answer (as Google).
  EXPECT_THROW(read_squad_examples(path, {true, false}), DataError);
  // Prediction reads the question whatever its answers.
  EXPECT_EQ(read_squad_examples(path, {false, false}).size(), 1U);
}

TEST(SquadFeatures, QueryTruncatedToMaxQueryLength) {
  TempDir dir;
  const auto path =
      write_squad(dir, kStoreContext, R"({"id": "q", "question": "what year was the man ?"})");
  FeatureOptions options;
  options.max_query_length = 2;
  options.max_seq_length = 20;
  const auto features =
      convert_examples_to_features(read_squad_examples(path, {}), word_tokenizer(), options);
  ASSERT_EQ(features.size(), 1U);
  EXPECT_EQ(features[0].tokens[1], "what");
  EXPECT_EQ(features[0].tokens[2], "year");
  EXPECT_EQ(features[0].tokens[3], "[SEP]");
}

std::string error_of(const fs::path& path, ReadOptions options) {
  try {
    read_squad_examples(path, options);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(SquadData, BadInputIsNamed) {
  TempDir dir;
  const fs::path broken = dir / "broken.json";
  write_file(broken, "{\"data\": [\n  {\"paragraphs\": [}\n]}");
  EXPECT_NE(error_of(broken, {}).find("broken.json:2:"), std::string::npos) << error_of(broken, {});

  const fs::path no_question = write_squad(dir, kStoreContext, R"({"id": "q"})");
  const std::string missing = error_of(no_question, {});
  EXPECT_NE(missing.find("data[0].paragraphs[0].qas[0] has no \"question\""), std::string::npos)
      << missing;

  const fs::path twice = write_squad(dir, kStoreContext,
                                     R"({"id": "q", "question": "what"},
                                        {"id": "q", "question": "what year"})");
  const std::string duplicate = error_of(twice, {});
  EXPECT_NE(duplicate.find("qas[1]: question id \"q\" appears twice"), std::string::npos)
      << duplicate;

  const fs::path wrong_type = write_squad(
      dir, kStoreContext,
      R"({"id": "q", "question": "what", "answers": [{"text": "milk", "answer_start": "48"}]})");
  const std::string type = error_of(wrong_type, {true, false});
  EXPECT_NE(type.find("answers[0].answer_start must be an integer"), std::string::npos) << type;
}

TEST(SquadData, UnrecoverableAnswersAreSkippedAndCounted) {
  TempDir dir;
  // q1: text "milk" but answer_start at "gallon" (Google's "Could not find answer");
  // q2: answer_start past the end of the 53-character context; q3 is fine.
  const auto path = write_squad(
      dir, kStoreContext,
      R"({"id": "q1", "question": "what", "answers": [{"text": "milk", "answer_start": 39}]},
         {"id": "q2", "question": "what", "answers": [{"text": "milk", "answer_start": 60}]},
         {"id": "q3", "question": "what", "answers": [{"text": "milk", "answer_start": 49}]})");
  ReadReport report;
  const auto examples = read_squad_examples(path, {true, false}, &report);
  ASSERT_EQ(examples.size(), 1U);
  EXPECT_EQ(examples[0].qas_id, "q3");
  EXPECT_EQ(report.questions, 3);
  EXPECT_EQ(report.skipped_ids, (std::vector<std::string>{"q1", "q2"}));
  // Prediction does not look at answers: all three are read.
  EXPECT_EQ(read_squad_examples(path, {false, false}).size(), 3U);

  const auto empty = write_squad(dir, " \n ", R"({"id": "e", "question": "what"})");
  ReadReport empty_report;
  EXPECT_TRUE(read_squad_examples(empty, {}, &empty_report).empty());
  EXPECT_EQ(empty_report.empty_context_ids, (std::vector<std::string>{"e"}));
}

TEST(SquadFeatures, ToolErrorsExitTwoWithTheClosestFlag) {
  const auto unknown =
      run_bertlab({"squad", "features", "--vocab_file", vocab_file(), "--max_seq_lenght", "128"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("did you mean --max_seq_length?"), std::string::npos) << unknown.err;
  const auto missing = run_bertlab({"squad", "features", "--vocab_file", vocab_file()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--input is required"), std::string::npos) << missing.err;
  const auto bad_file = run_bertlab({"squad", "features", "--vocab_file", vocab_file(), "--input",
                                     data_path("squad/vanilla.json").string(), "--training"});
  EXPECT_EQ(bad_file.exit_code, 1);
  EXPECT_NE(bad_file.err.find("vanilla.json: data[0].paragraphs[0].qas[0].answers has 2"),
            std::string::npos)
      << bad_file.err;
}

}  // namespace
}  // namespace bertlab::squad
