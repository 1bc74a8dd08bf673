// The official SQuAD metrics (evaluate-v1.1.py, evaluate-v2.0.py) through the real executable:
// the BERT ensemble's published dev-v1.1 score, a hand-scored SQuAD 2.0 set with null odds, the
// all-no-answer baseline on dev-v2.0, normalization, missing predictions and bad input.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "squad_eval.h"
#include "squad_json.h"
#include "test_util.h"

namespace bertlab::squad {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;
using testing::write_file;

std::vector<std::string> keys_of(const ordered_json& object) {
  std::vector<std::string> keys;
  for (const auto& item : object.items()) keys.push_back(item.key());
  return keys;
}

// A SQuAD file of one article and one paragraph; `qas` is [[id, [answer texts]]].
json dataset(const std::string& version,
             const std::vector<std::pair<std::string, std::vector<std::string>>>& qas) {
  json questions = json::array();
  for (const auto& [id, answers] : qas) {
    json qa = {{"id", id}, {"question", "Who?"}, {"answers", json::array()}};
    for (const auto& text : answers) qa["answers"].push_back({{"text", text}, {"answer_start", 0}});
    if (version == "v2.0") qa["is_impossible"] = answers.empty();
    questions.push_back(qa);
  }
  return {{"version", version},
          {"data",
           {{{"title", "Normans"},
             {"paragraphs", {{{"context", "The Normans."}, {"qas", questions}}}}}}}};
}

TEST(SquadEval, BertEnsembleDevV11AsOfficialScript) {
  const auto result = run_bertlab({"squad", "evaluate", "--data_file",
                                   data_path("squad/dev-v1.1.json.zip").string(), "--pred_file",
                                   data_path("squad/v1.1-bert-ensemble.json").string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // The output of evaluate-v1.1.py (re-typed from the official script, run with python3 on the
  // unzipped dev-v1.1.json and these predictions): the BERT paper's 86.2 EM / 92.2 F1 for the
  // ensemble, rounded.
  EXPECT_EQ(result.out, "{\"exact_match\": 86.20624408703878, \"f1\": 92.19557978351145}\n");
  const auto metrics = ordered_json::parse(result.out);
  EXPECT_EQ(keys_of(metrics), (std::vector<std::string>{"exact_match", "f1"}));
  EXPECT_NEAR(metrics["exact_match"].get<double>(), 86.20624408703878, 1e-6);
  EXPECT_NEAR(metrics["f1"].get<double>(), 92.19557978351145, 1e-6);
  EXPECT_EQ(result.err, "");  // version 1.1, every question predicted: no warnings
}

// Five questions scored by hand (normalized forms in quotes):
//   q1 HasAns golds "normans" (twice, as "The Normans" and "Normans"), pred "normans": EM 1, F1 1.
//   q2 HasAns golds "10th and 11th centuries", "in 10th and 11th centuries", pred "10th century":
//      one common token; F1 = 2PR/(P+R) with P = 1/2 and R = 1/4 (first gold) = 1/3, or R = 1/5
//      (second) = 2/7; max 1/3. EM 0.
//   q3 HasAns gold "Rollo, Duke of Normandy!" → "rollo duke of normandy", pred "the Rollo (duke) of
//      a Normandy." → the same: EM 1, F1 1.
//   q4 NoAns, pred "": EM 1, F1 1 (both empty).
//   q5 NoAns, pred "France": EM 0, F1 0.
// Null odds q1 .1, q2 .4, q3 .3, q4 .9, q5 .5, all below the default threshold 1.0.
struct HandSet {
  TempDir dir;
  std::string data = (dir / "dev.json").string();
  std::string pred = (dir / "pred.json").string();
  std::string odds = (dir / "null_odds.json").string();
  HandSet() {
    write_file(data, dataset("v2.0",
                             {{"q1", {"The Normans", "Normans"}},
                              {"q2", {"10th and 11th centuries", "in the 10th and 11th centuries"}},
                              {"q3", {"Rollo, Duke of Normandy!"}},
                              {"q4", {}},
                              {"q5", {}}})
                         .dump(1));
    write_file(pred, json({{"q1", "normans"},
                           {"q2", "the 10th century"},
                           {"q3", "the Rollo (duke) of a Normandy."},
                           {"q4", ""},
                           {"q5", "France"}})
                         .dump());
    // Not in question order, to show the sweep sorts by odds.
    write_file(odds, R"({"q5": 0.5, "q4": 0.9, "q3": 0.3, "q2": 0.4, "q1": 0.1})");
  }
};

TEST(SquadEval, HandScoredV2WithNullOdds) {
  HandSet set;
  const auto result = run_bertlab({"squad", "evaluate", "--data_file", set.data, "--pred_file",
                                   set.pred, "--na_prob_file", set.odds});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto m = ordered_json::parse(result.out);
  EXPECT_EQ(keys_of(m), (std::vector<std::string>{
                            "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                            "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact",
                            "best_exact_thresh", "best_f1", "best_f1_thresh"}));
  // Sums in question order, as the official script's sum() over its dicts.
  EXPECT_EQ(m["exact"].get<double>(), 100.0 * 3 / 5);                               // 60
  EXPECT_EQ(m["f1"].get<double>(), 100.0 * (1.0 + 1.0 / 3 + 1.0 + 1.0 + 0.0) / 5);  // 66.67
  EXPECT_TRUE(m["total"].is_number_integer());
  EXPECT_EQ(m["total"].get<int>(), 5);
  EXPECT_EQ(m["HasAns_exact"].get<double>(), 100.0 * 2 / 3);
  EXPECT_EQ(m["HasAns_f1"].get<double>(), 100.0 * (1.0 + 1.0 / 3 + 1.0) / 3);
  EXPECT_EQ(m["HasAns_total"].get<int>(), 3);
  EXPECT_EQ(m["NoAns_exact"].get<double>(), 50.0);
  EXPECT_EQ(m["NoAns_f1"].get<double>(), 50.0);
  EXPECT_EQ(m["NoAns_total"].get<int>(), 2);
  // find_best_thresh: start from the 2 no-answer questions, visit by rising odds
  // q1 .1, q3 .3, q2 .4, q5 .5, q4 .9, adding a HasAns question's score, -1 for a NoAns question
  // answered with text (q5), 0 for one left empty (q4).
  //   exact: 2 → 3 (.1) → 4 (.3) → 4 → 3 → 3: best 4 at .3.
  //   f1:    2 → 3 (.1) → 4 (.3) → 4 + 1/3 (.4) → 3 + 1/3 → 3 + 1/3: best 4 + 1/3 at .4.
  EXPECT_EQ(m["best_exact"].get<double>(), 100.0 * 4 / 5);
  EXPECT_EQ(m["best_exact_thresh"].get<double>(), 0.3);
  EXPECT_EQ(m["best_f1"].get<double>(), 100.0 * (2 + 1.0 + 1.0 + 1.0 / 3) / 5);
  EXPECT_EQ(m["best_f1_thresh"].get<double>(), 0.4);
  // evaluate-v2.0.py prints json.dumps(indent=2); the re-typed official script printed this
  // for the same files.
  EXPECT_EQ(result.out,
            "{\n  \"exact\": 60.0,\n  \"f1\": 66.66666666666666,\n  \"total\": 5,\n"
            "  \"HasAns_exact\": 66.66666666666667,\n  \"HasAns_f1\": 77.77777777777777,\n"
            "  \"HasAns_total\": 3,\n  \"NoAns_exact\": 50.0,\n  \"NoAns_f1\": 50.0,\n"
            "  \"NoAns_total\": 2,\n  \"best_exact\": 80.0,\n  \"best_exact_thresh\": 0.3,\n"
            "  \"best_f1\": 86.66666666666666,\n  \"best_f1_thresh\": 0.4\n}\n");
}

TEST(SquadEval, NoAnswerThresholdAndOfficialCommandLine) {
  HandSet set;
  TempDir out;
  const std::string out_file = (out / "eval.json").string();
  // evaluate-v2.0.py's own form: DATA PRED -n NA -t T -o OUT.
  const auto result = run_bertlab(
      {"squad", "evaluate", set.data, set.pred, "-n", set.odds, "-t", "0.35", "-o", out_file});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "");
  const std::string text = read_file(out_file);
  EXPECT_EQ(text.find('\n'), std::string::npos);  // json.dump without indent: one line
  const auto m = ordered_json::parse(text);
  // Odds above .35 (q2 .4, q5 .5, q4 .9) count as "no answer": 0 for HasAns q2, 1 for the NoAns
  // q4 and q5; q1 and q3 keep their 1.
  EXPECT_EQ(m["exact"].get<double>(), 80.0);
  EXPECT_EQ(m["f1"].get<double>(), 80.0);
  EXPECT_EQ(m["HasAns_exact"].get<double>(), 100.0 * 2 / 3);
  EXPECT_EQ(m["HasAns_f1"].get<double>(), 100.0 * 2 / 3);
  EXPECT_EQ(m["NoAns_exact"].get<double>(), 100.0);
  EXPECT_EQ(m["NoAns_f1"].get<double>(), 100.0);
  // The sweep uses the raw scores, so the best thresholds do not change.
  EXPECT_EQ(m["best_exact_thresh"].get<double>(), 0.3);
  EXPECT_EQ(m["best_f1_thresh"].get<double>(), 0.4);
  // Same numbers with --flag=value spellings.
  const auto again =
      run_bertlab({"squad", "evaluate", "--data_file=" + set.data, "--pred_file=" + set.pred,
                   "--na_prob_file=" + set.odds, "--na_prob_thresh=0.35"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(ordered_json::parse(again.out), m);
}

TEST(SquadEval, AllEmptyPredictionsOnDevV20ScoreTheNoAnswerShare) {
  const auto dev = read_json_file(data_path("squad/dev-v2.0.json.zip"));
  json preds = json::object();
  int64_t total = 0;
  int64_t no_answer = 0;
  for (const auto& article : dev["data"]) {
    for (const auto& paragraph : article["paragraphs"]) {
      for (const auto& qa : paragraph["qas"]) {
        preds[qa["id"].get<std::string>()] = "";
        ++total;
        if (qa["answers"].empty()) ++no_answer;
      }
    }
  }
  TempDir dir;
  write_file(dir / "pred.json", preds.dump());
  const auto result = run_bertlab({"squad", "evaluate", "--data_file",
                                   data_path("squad/dev-v2.0.json.zip").string(), "--pred_file",
                                   (dir / "pred.json").string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto m = ordered_json::parse(result.out);
  // "" is right exactly for the unanswerable questions (5945 of 11873 in dev-v2.0).
  EXPECT_EQ(m["total"].get<int64_t>(), total);
  EXPECT_EQ(m["exact"].get<double>(), 100.0 * static_cast<double>(no_answer) / total);
  EXPECT_EQ(m["f1"].get<double>(), 100.0 * static_cast<double>(no_answer) / total);
  EXPECT_EQ(m["HasAns_exact"].get<double>(), 0.0);
  EXPECT_EQ(m["HasAns_f1"].get<double>(), 0.0);
  EXPECT_EQ(m["HasAns_total"].get<int64_t>(), total - no_answer);
  EXPECT_EQ(m["NoAns_exact"].get<double>(), 100.0);
  EXPECT_EQ(m["NoAns_total"].get<int64_t>(), no_answer);
  EXPECT_FALSE(m.contains("best_exact"));  // no null odds given
}

// Expected forms from Python: the official normalize_answer run by python3 on each input.
TEST(SquadEval, NormalizeAnswerAsPython) {
  EXPECT_EQ(normalize_answer("The Normans"), "normans");
  EXPECT_EQ(normalize_answer("  an apple,  a day! "), "apple day");
  EXPECT_EQ(normalize_answer("theory of the anthem"), "theory of anthem");  // whole words only
  EXPECT_EQ(normalize_answer("THE END"), "end");
  EXPECT_EQ(normalize_answer("The_the"), "thethe");  // "_" is punctuation, removed first
  EXPECT_EQ(normalize_answer("l'amour"), "lamour");
  EXPECT_EQ(normalize_answer("\u00abthe\u00bb end"), "\u00ab \u00bb end");  // « » are not ASCII
  // Unicode: lower-casing, word boundaries at non-letters, Python's whitespace.
  EXPECT_EQ(normalize_answer("\u00c7a VA"), "\u00e7a va");
  EXPECT_EQ(normalize_answer("the \u00e9lan"), "\u00e9lan");
  EXPECT_EQ(normalize_answer("th\u00e9"), "th\u00e9");  // é is a word letter: no article
  EXPECT_EQ(normalize_answer("a1"), "a1");
  EXPECT_EQ(normalize_answer("a\u2212b"), "\u2212b");  // U+2212 minus ends the word "a"
  EXPECT_EQ(normalize_answer("the\u00a0end"), "end");
  EXPECT_EQ(normalize_answer("\t1\u2003000\x1c"), "1 000");
  // str.lower()'s full mapping: final sigma, and I with dot above → i + combining dot.
  EXPECT_EQ(normalize_answer("\u039f\u0394\u039f\u03a3"), "\u03bf\u03b4\u03bf\u03c2");
  EXPECT_EQ(normalize_answer("\u03a3\u0391\u03a3."), "\u03c3\u03b1\u03c2");
  EXPECT_EQ(normalize_answer("a\u03a3'b"), "a\u03c3b");  // not final: a letter follows
  EXPECT_EQ(normalize_answer("\u03a3"), "\u03c3");
  EXPECT_EQ(normalize_answer("\u0130"), "i\u0307");
}

TEST(SquadEval, MissingPredictionsScoreZeroWithAWarning) {
  TempDir dir;
  write_file(dir / "dev.json",
             dataset("1.0", {{"a", {"Rollo"}}, {"b", {"Normandy"}}, {"c", {"France"}}}).dump());
  write_file(dir / "pred.json", R"({"a": "Rollo", "c": "France"})");
  const auto result = run_bertlab({"squad", "evaluate", "--data_file", (dir / "dev.json").string(),
                                   "--pred_file", (dir / "pred.json").string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // b counts in the total with 0: 2 of 3 right.
  const auto m = ordered_json::parse(result.out);
  EXPECT_EQ(m["exact_match"].get<double>(), 100.0 * 2 / 3);
  EXPECT_EQ(m["f1"].get<double>(), 100.0 * 2.0 / 3);
  EXPECT_NE(result.err.find("Evaluation expects v-1.1, but got dataset with v-1.0"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("1 question(s) have no prediction"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("(b)"), std::string::npos) << result.err;

  // SQuAD 2.0: the missing question scores 0 everywhere and stays out of the sweep.
  write_file(dir / "dev2.json", dataset("v2.0", {{"a", {"Rollo"}}, {"b", {}}, {"c", {}}}).dump());
  write_file(dir / "pred2.json", R"({"a": "Rollo", "c": ""})");
  write_file(dir / "odds2.json", R"({"a": 0.2, "c": 0.7})");
  const auto v2 =
      run_bertlab({"squad", "evaluate", "--data_file", (dir / "dev2.json").string(), "--pred_file",
                   (dir / "pred2.json").string(), "--na_prob_file", (dir / "odds2.json").string()});
  ASSERT_EQ(v2.exit_code, 0) << v2.err;
  const auto m2 = ordered_json::parse(v2.out);
  EXPECT_EQ(m2["exact"].get<double>(), 100.0 * 2 / 3);
  EXPECT_EQ(m2["total"].get<int>(), 3);
  EXPECT_EQ(m2["NoAns_exact"].get<double>(), 50.0);  // c right, b missing
  // Sweep from the 1 predicted no-answer question (c): a +1 at .2 → 2, c 0 → best 2 of 3.
  EXPECT_EQ(m2["best_exact"].get<double>(), 100.0 * 2 / 3);
  EXPECT_EQ(m2["best_exact_thresh"].get<double>(), 0.2);
  EXPECT_NE(v2.err.find("1 question(s) have no prediction"), std::string::npos) << v2.err;
}

TEST(SquadEval, BadFlagsAndFilesAreNamed) {
  HandSet set;
  const auto typo =
      run_bertlab({"squad", "evaluate", "--data_file", set.data, "--pred_fil", set.pred});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("--pred_fil"), std::string::npos) << typo.err;
  EXPECT_NE(typo.err.find("did you mean --pred_file?"), std::string::npos) << typo.err;

  const auto no_pred = run_bertlab({"squad", "evaluate", "--data_file", set.data});
  EXPECT_EQ(no_pred.exit_code, 2);
  EXPECT_NE(no_pred.err.find("--pred_file"), std::string::npos) << no_pred.err;

  const std::string absent = (set.dir / "absent.json").string();
  const auto missing =
      run_bertlab({"squad", "evaluate", "--data_file", set.data, "--pred_file", absent});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find(absent), std::string::npos) << missing.err;

  // The second "," of line 2 (column 13) is where the JSON goes wrong.
  const std::string bad = (set.dir / "bad.json").string();
  write_file(bad, "{\n  \"q1\": \"x\",,\n}\n");
  const auto malformed =
      run_bertlab({"squad", "evaluate", "--data_file", set.data, "--pred_file", bad});
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_NE(malformed.err.find(bad + ":2:13"), std::string::npos) << malformed.err;

  write_file(bad, R"({"q1": 3})");
  const auto not_text =
      run_bertlab({"squad", "evaluate", "--data_file", set.data, "--pred_file", bad});
  EXPECT_EQ(not_text.exit_code, 1);
  EXPECT_NE(not_text.err.find("\"q1\""), std::string::npos) << not_text.err;

  write_file(bad, R"({"q1": "0.5"})");
  const auto odds_text = run_bertlab({"squad", "evaluate", "--data_file", set.data, "--pred_file",
                                      set.pred, "--na_prob_file", bad});
  EXPECT_EQ(odds_text.exit_code, 1);
  EXPECT_NE(odds_text.err.find(bad), std::string::npos) << odds_text.err;
  EXPECT_NE(odds_text.err.find("\"q1\""), std::string::npos) << odds_text.err;

  write_file(bad, R"({"version": "1.1"})");
  const auto no_data =
      run_bertlab({"squad", "evaluate", "--data_file", bad, "--pred_file", set.pred});
  EXPECT_EQ(no_data.exit_code, 1);
  EXPECT_NE(no_data.err.find("\"data\""), std::string::npos) << no_data.err;

  // A question without "answers": the message says where it is.
  write_file(bad, R"({"version": "1.1", "data": [{"paragraphs": [{"qas": [{"id": "q9"}]}]}]})");
  const auto no_answers =
      run_bertlab({"squad", "evaluate", "--data_file", bad, "--pred_file", set.pred});
  EXPECT_EQ(no_answers.exit_code, 1);
  EXPECT_NE(no_answers.err.find("data[0].paragraphs[0].qas[0] (q9) has no \"answers\""),
            std::string::npos)
      << no_answers.err;
}

}  // namespace
}  // namespace bertlab::squad
