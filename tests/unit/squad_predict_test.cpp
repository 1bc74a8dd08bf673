// SQuAD predictions: the three files byte for byte as Google's write_predictions writes them for
// the same features and logits, get_final_text, and Python's JSON number format.

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <bertlab/io/python_json.h>
#include "squad_data.h"
#include "squad_features.h"
#include "squad_predict.h"
#include "test_util.h"

namespace bertlab::squad {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::TempDir;

// The logits the fixtures were made with: a 32-bit LCG (glibc's constants), each draw mapped to
// [-5, 5) and rounded to float32, start logits then end logits, feature by feature. The
// generator (tests/data/squad/README.md) does the same in Python.
class LogitStream {
 public:
  float next() {
    state_ = (1103515245ULL * state_ + 12345ULL) % (1ULL << 32);
    return static_cast<float>(static_cast<double>(state_ >> 8) / 16777216.0 * 10.0 - 5.0);
  }

 private:
  uint64_t state_ = 12345;
};

struct Case {
  std::string input;
  bool v2 = false;
  int64_t max_seq_length = 0;
  int64_t doc_stride = 0;
  int64_t max_query_length = 0;
  int64_t n_best_size = 20;
  int64_t max_answer_length = 30;
  double threshold = 0.0;
  std::string expected_dir;
};

void expect_google_files(const Case& c) {
  SCOPED_TRACE(c.expected_dir);
  const FullTokenizer tokenizer(data_path("vocab/bert-base-uncased/vocab.txt"), true);
  const auto examples = read_squad_examples(data_path("squad/" + c.input), {false, c.v2});
  FeatureOptions options;
  options.max_seq_length = c.max_seq_length;
  options.doc_stride = c.doc_stride;
  options.max_query_length = c.max_query_length;
  const auto features = convert_examples_to_features(examples, tokenizer, options);
  LogitStream stream;
  std::vector<RawResult> results;
  for (const auto& f : features) {
    RawResult r;
    r.unique_id = f.unique_id;
    for (int64_t i = 0; i < c.max_seq_length; ++i) r.start_logits.push_back(stream.next());
    for (int64_t i = 0; i < c.max_seq_length; ++i) r.end_logits.push_back(stream.next());
    results.push_back(std::move(r));
  }
  PredictionOptions prediction;
  prediction.n_best_size = c.n_best_size;
  prediction.max_answer_length = c.max_answer_length;
  prediction.version_2_with_negative = c.v2;
  prediction.null_score_diff_threshold = c.threshold;
  const auto predictions = make_predictions(examples, features, results, prediction);
  TempDir out;
  write_prediction_files(predictions, out.path(), c.v2);
  const fs::path expected = data_path("squad/predict/" + c.expected_dir);
  std::vector<std::string> names = {"predictions.json", "nbest_predictions.json"};
  if (c.v2) names.emplace_back("null_odds.json");
  for (const auto& name : names) {
    EXPECT_EQ(read_file(out / name), read_file(expected / name)) << name;
  }
  EXPECT_EQ(fs::exists(out / "null_odds.json"), c.v2);
}

TEST(SquadPredict, V2FilesAsGoogle) {
  expect_google_files({"normans-3-train-v2.0.json", true, 64, 16, 12, 20, 30, 0.0, "v2-seq64"});
}

TEST(SquadPredict, V2SmallNbestShortAnswersNegativeThresholdAsGoogle) {
  expect_google_files(
      {"normans-3-train-v2.0.json", true, 64, 16, 12, 5, 8, -1.5, "v2-seq64-nbest5-thresh-1.5"});
}

TEST(SquadPredict, V1FilesAsGoogle) {
  expect_google_files({"dev-sample.json", false, 48, 8, 8, 20, 30, 0.0, "v1-dev-sample-seq48"});
}

TEST(SquadPredict, V1NonAsciiContextsAsGoogle) {
  // Four dev-v1.1 paragraphs with CJK, Cyrillic, Arabic, accents, U+200E and U+FEFF: answers
  // cut inside words map back through get_final_text in code points; JSON escapes non-ASCII.
  expect_google_files({"predict/dev-v1.1-unicode.json", false, 64, 16, 12, 10, 30, 0.0,
                       "v1-unicode-seq64-nbest10"});
}

TEST(SquadPredict, V2NonAsciiContextsPositiveThresholdAsGoogle) {
  expect_google_files({"predict/dev-v1.1-unicode.json", true, 64, 16, 12, 6, 10, 2.0,
                       "v2-unicode-seq64-nbest6-len10-thresh2"});
}

// One question on "Steve Smith's house" in two windows of max_seq_length 8, as
// convert_examples_to_features would cut it (uncased pieces, doc_stride 2).
struct TwoWindows {
  std::vector<SquadExample> examples;
  std::vector<SquadFeature> features;
  std::vector<RawResult> results;

  TwoWindows() {
    SquadExample example;
    example.qas_id = "q1";
    example.doc_tokens = std::make_shared<const std::vector<std::string>>(
        std::vector<std::string>{"Steve", "Smith's", "house"});
    examples.push_back(example);
    SquadFeature a;
    a.unique_id = kFirstUniqueId;
    a.tokens = {"[CLS]", "who", "[SEP]", "steve", "smith", "'", "s", "[SEP]"};
    a.token_to_orig = {-1, -1, -1, 0, 1, 1, 1, -1};
    a.token_is_max_context = {0, 0, 0, 1, 1, 0, 0, 0};
    SquadFeature b;
    b.unique_id = kFirstUniqueId + 1;
    b.doc_span_index = 1;
    b.tokens = {"[CLS]", "who", "[SEP]", "'", "s", "house", "[SEP]"};
    b.token_to_orig = {-1, -1, -1, 1, 1, 2, -1};
    b.token_is_max_context = {0, 0, 0, 1, 1, 1, 0};
    features = {a, b};
    // Null scores (position 0): 1.5 + 0.25 = 1.75 in window a, -0.5 + 1.0 = 0.5 in window b.
    // Every logit is exact in float32, so the sums below are exact.
    results.push_back(
        {a.unique_id, {1.5f, 0, 0, 3.0f, 0, 0, 0, 0}, {0.25f, 0, 0, 0, 2.0f, 0, 0, 0}});
    results.push_back({b.unique_id, {-0.5f, 0, 0, 0, 0, 0, 0, 0}, {1.0f, 0, 0, 0, 0, 0, 0, 0}});
  }
};

TEST(SquadPredict, HandWindowsBestSpanAndNullOdds) {
  // Derived by hand, and what Google's write_predictions gives for the same features and logits
  // (checked with the oracle's run_squad.py): the best span is window a's "steve smith" (3.0 + 2.0
  // = 5.0), mapped back to "Steve Smith" (the "'s" dropped); score_null is window b's 0.5, so the
  // null odds are 0.5 - 3.0 - 2.0 = -4.5 and with threshold 0 the span is the answer.
  const TwoWindows w;
  PredictionOptions options;
  options.version_2_with_negative = true;
  const auto p = make_predictions(w.examples, w.features, w.results, options);
  ASSERT_EQ(p.answers.size(), 1u);
  EXPECT_EQ(p.answers[0].second, "Steve Smith");
  ASSERT_EQ(p.null_odds.size(), 1u);
  EXPECT_EQ(p.null_odds[0].second, -4.5);
  ASSERT_FALSE(p.nbest[0].second.empty());
  EXPECT_EQ(p.nbest[0].second[0].text, "Steve Smith");
  EXPECT_EQ(p.nbest[0].second[0].start_logit, 3.0);
  EXPECT_EQ(p.nbest[0].second[0].end_logit, 2.0);
  // A threshold below -4.5 prefers the null answer.
  options.null_score_diff_threshold = -5.0;
  EXPECT_EQ(make_predictions(w.examples, w.features, w.results, options).answers[0].second, "");
}

TEST(SquadPredict, NoValidSpanV2AnswersNullWhereGoogleFails) {
  // max_answer_length 0 (or n_best_size 0) leaves no candidate span, so the n-best holds only
  // the null answer and Google's write_predictions fails on best_non_null_entry None. Ours (see
  // make_predictions): answer "", null odds score_null - 0 = 0.5 (window b's null score), whatever
  // the threshold; the n-best is the null answer of window b with probability 1.
  const TwoWindows w;
  for (const auto& [n_best_size, max_answer_length] :
       std::vector<std::pair<int64_t, int64_t>>{{20, 0}, {0, 30}, {-1, 30}}) {
    SCOPED_TRACE(n_best_size);
    PredictionOptions options;
    options.version_2_with_negative = true;
    options.n_best_size = n_best_size;
    options.max_answer_length = max_answer_length;
    options.null_score_diff_threshold = -100.0;
    const auto p = make_predictions(w.examples, w.features, w.results, options);
    EXPECT_EQ(p.answers[0].second, "");
    EXPECT_EQ(p.null_odds[0].second, 0.5);
    ASSERT_EQ(p.nbest[0].second.size(), 1u);
    EXPECT_EQ(p.nbest[0].second[0].text, "");
    EXPECT_EQ(p.nbest[0].second[0].probability, 1.0);
    EXPECT_EQ(p.nbest[0].second[0].start_logit, -0.5);
    EXPECT_EQ(p.nbest[0].second[0].end_logit, 1.0);
    TempDir out;
    write_prediction_files(p, out.path(), true);
    EXPECT_EQ(read_file(out / "predictions.json"), "{\n    \"q1\": \"\"\n}\n");
    EXPECT_EQ(read_file(out / "null_odds.json"), "{\n    \"q1\": 0.5\n}\n");
  }
}

TEST(SquadPredict, NoValidSpanV1IsGooglesEmptyNonce) {
  // Google's nonce where no span is valid: text "empty", logits 0.0, probability 1.0; the files
  // are what Google's write_predictions writes for the same features and logits.
  const TwoWindows w;
  PredictionOptions options;
  options.max_answer_length = 0;
  const auto p = make_predictions(w.examples, w.features, w.results, options);
  EXPECT_EQ(p.answers[0].second, "empty");
  EXPECT_TRUE(p.null_odds.empty());
  TempDir out;
  write_prediction_files(p, out.path(), false);
  EXPECT_EQ(read_file(out / "predictions.json"), "{\n    \"q1\": \"empty\"\n}\n");
  EXPECT_EQ(read_file(out / "nbest_predictions.json"),
            "{\n    \"q1\": [\n        {\n            \"text\": \"empty\",\n"
            "            \"probability\": 1.0,\n            \"start_logit\": 0.0,\n"
            "            \"end_logit\": 0.0\n        }\n    ]\n}\n");
  EXPECT_FALSE(fs::exists(out / "null_odds.json"));
}

TEST(SquadPredict, ShortLogitsAreNamed) {
  TwoWindows w;
  w.results[1].end_logits.resize(3);
  try {
    make_predictions(w.examples, w.features, w.results, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unique_id 1000000001"), std::string::npos) << e.what();
  }
}

TEST(SquadPredict, MissingResultIsNamed) {
  const FullTokenizer tokenizer(data_path("vocab/bert-base-uncased/vocab.txt"), true);
  const auto examples = read_squad_examples(data_path("squad/dev-sample.json"), {});
  const auto features = convert_examples_to_features(examples, tokenizer, {});
  try {
    make_predictions(examples, features, {}, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unique_id 1000000000"), std::string::npos) << e.what();
  }
}

TEST(SquadPredict, FinalTextMapsBackToTheOriginalWords) {
  // Each expected value is what Google's get_final_text returns for the same input (checked
  // with the oracle's run_squad.py). Google's own example: the "'s" of the original is dropped.
  EXPECT_EQ(get_final_text("steve smith", "Steve Smith's", true), "Steve Smith");
  // Accents stripped by the uncased tokenizer come back from the original.
  EXPECT_EQ(get_final_text("cafe", "Café,", true), "Café");
  // A prediction not found in the tokenized original gives the original.
  EXPECT_EQ(get_final_text("xyz", "Rollo's", true), "Rollo's");
  // A prediction inside a punctuated word.
  EXPECT_EQ(get_final_text("1895", "(1895-1943).", true), "1895");
  // Non-ASCII in code points: the CJK characters are split by the tokenizer, then rejoined.
  EXPECT_EQ(get_final_text("北 京", "在北京。", true), "北京");
}

TEST(SquadPyJson, FloatsAsPythonRepr) {
  // Each expected string is what python3's repr() prints for the same double.
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(3.0), "3.0");
  EXPECT_EQ(python_float_repr(-2.5e-07), "-2.5e-07");
  EXPECT_EQ(python_float_repr(86.2), "86.2");
  EXPECT_EQ(python_float_repr(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(python_float_repr(123456789.125), "123456789.125");
  EXPECT_EQ(python_float_repr(std::nan("")), "NaN");
  EXPECT_EQ(python_float_repr(-std::numeric_limits<double>::infinity()), "-Infinity");
}

TEST(SquadPyJson, DumpsAsPython) {
  nlohmann::ordered_json j;
  j["b"] = 1;
  j["a"] = nlohmann::ordered_json::array({1.5, "é\n", true, nullptr});
  j["e"] = nlohmann::ordered_json::object();
  // python3: json.dumps({"b": 1, "a": [1.5, "é\n", True, None], "e": {}}) and with indent=2.
  EXPECT_EQ(python_json_dumps(j), R"({"b": 1, "a": [1.5, "\u00e9\n", true, null], "e": {}})");
  EXPECT_EQ(python_json_dumps(j, 2),
            "{\n  \"b\": 1,\n  \"a\": [\n    1.5,\n    \"\\u00e9\\n\",\n    true,\n    null\n  ],"
            "\n  \"e\": {}\n}");
}

}  // namespace
}  // namespace bertlab::squad
