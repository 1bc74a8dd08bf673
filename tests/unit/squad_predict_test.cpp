// SQuAD predictions: the three files byte for byte as Google's write_predictions writes them for
// the same features and logits, get_final_text, and Python's JSON number format.

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "squad_data.h"
#include "squad_features.h"
#include "squad_predict.h"
#include "squad_pyjson.h"
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
