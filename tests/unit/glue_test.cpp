// Every GLUE task in the classifier plugin: the real GLUE column layouts (fixtures of our own
// sentences in tests/data/glue/), Hugging Face's task names and metrics, regression (STS-B),
// MNLI's two evaluation sets, the generic tsv/jsonl formats, their errors, and end-to-end runs
// of the real `bertlab` executable.

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <bertlab/error.h>
#include <bertlab/model/bert.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "batching.h"
#include "classifier.h"
#include "classifier_model.h"
#include "generic_processor.h"
#include "metrics.h"
#include "options.h"
#include "processors.h"
#include "test_util.h"
#include "trec.h"

namespace bertlab::classifier {
namespace {

namespace fs = std::filesystem;
using bertlab::testing::data_path;
using bertlab::testing::read_file;
using bertlab::testing::run_bertlab;
using bertlab::testing::TempDir;
using bertlab::testing::write_file;

// ---------------------------------------------------------------------------------------------
// Helpers

/// Runs `fn`, expects an exception of type E, returns its message.
template <typename E, typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type thrown";
  return "";
}

/// Expects every one of `parts` in `message`.
void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "missing \"" << part << "\" in: " << message;
  }
}

const FullTokenizer& uncased_tokenizer() {
  static const FullTokenizer tokenizer(data_path("vocab/bert-base-uncased/vocab.txt"), true);
  return tokenizer;
}

ConfigView task_view(std::map<std::string, OptionValue> values) {
  return ConfigView("task", classifier_option_decls(), std::move(values));
}

/// Pearson's r by the raw-sums formula (not the centred one metrics.cpp uses).
double pearson_by_sums(const std::vector<double>& x, const std::vector<double>& y) {
  const auto n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    syy += y[i] * y[i];
    sxy += x[i] * y[i];
  }
  return (n * sxy - sx * sy) / std::sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
}

// ---------------------------------------------------------------------------------------------
// Task names

TEST(GlueTasks, HuggingFaceNamesAliasesAndGoogleNames) {
  for (const char* name :
       {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "xnli"}) {
    EXPECT_EQ(make_processor(name)->name(), name);
  }
  EXPECT_EQ(make_processor("sst-2")->name(), "sst2");
  EXPECT_EQ(make_processor("sts-b")->name(), "stsb");
  const ClassifierOptions options = ClassifierOptions::from_config(
      task_view({{"task_name", std::string("sts-b")}, {"data_dir", std::string("/data")}}));
  EXPECT_EQ(options.task_name, "stsb");
  const auto decls = classifier_option_decls();
  const OptionDecl& task_name = decls.front();
  ASSERT_EQ(task_name.key, "task_name");
  for (const char* name : {"sst-2", "sts-b", "tsv", "jsonl", "qqp"}) {
    EXPECT_FALSE(check_value(task_name, std::string(name)).has_value()) << name;
  }
  EXPECT_TRUE(check_value(task_name, std::string("mnli-mm")).has_value());
}

TEST(GlueTasks, LabelsAndMetricSets) {
  const std::vector<std::string> binary = {"0", "1"};
  const std::vector<std::string> entailment = {"entailment", "not_entailment"};
  const std::vector<std::string> nli = {"contradiction", "entailment", "neutral"};
  const std::map<std::string, std::pair<std::vector<std::string>, MetricSet>> expected = {
      {"cola", {binary, MetricSet::kMatthews}},      {"sst2", {binary, MetricSet::kAccuracy}},
      {"mrpc", {binary, MetricSet::kAccuracyAndF1}}, {"stsb", {{}, MetricSet::kPearsonSpearman}},
      {"qqp", {binary, MetricSet::kAccuracyAndF1}},  {"mnli", {nli, MetricSet::kAccuracy}},
      {"qnli", {entailment, MetricSet::kAccuracy}},  {"rte", {entailment, MetricSet::kAccuracy}},
      {"wnli", {binary, MetricSet::kAccuracy}},      {"xnli", {nli, MetricSet::kAccuracy}},
  };
  for (const auto& [name, want] : expected) {
    const auto processor = make_processor(name);
    EXPECT_EQ(processor->labels(), want.first) << name;
    EXPECT_EQ(processor->metric_set(), want.second) << name;
    EXPECT_EQ(processor->is_regression(), name == "stsb") << name;
  }
}

// ---------------------------------------------------------------------------------------------
// Reading each task's files

TEST(GlueProcessors, Sst2) {
  const auto p = make_processor("sst2");
  const auto train = p->train_examples(data_path("glue/SST-2"));
  const auto dev = p->dev_examples(data_path("glue/SST-2"));
  ASSERT_EQ(train.size(), 6u);  // header skipped
  ASSERT_EQ(dev.size(), 4u);
  EXPECT_EQ(train[0].guid, "train-1");
  EXPECT_EQ(train[0].text_a, "a warm , funny and quietly moving film ");
  EXPECT_EQ(train[0].text_b, "");
  EXPECT_EQ(train[0].label, "1");
  EXPECT_EQ(train[1].label, "0");
  EXPECT_EQ(dev[3].text_a, "nothing here works ");
  EXPECT_EQ(dev[3].label, "0");
}

TEST(GlueProcessors, Stsb) {
  const auto p = make_processor("stsb");
  const auto train = p->train_examples(data_path("glue/STS-B"));
  const auto dev = p->dev_examples(data_path("glue/STS-B"));
  ASSERT_EQ(train.size(), 6u);
  ASSERT_EQ(dev.size(), 4u);
  EXPECT_EQ(train[0].guid, "train-0");  // the index column
  EXPECT_EQ(train[0].text_a, "A man is playing a flute.");
  EXPECT_EQ(train[0].text_b, "A man plays the flute.");
  EXPECT_EQ(train[0].label, "4.800");
  EXPECT_EQ(dev[3].text_b, "A boy is in a pool.");
  EXPECT_EQ(dev[3].label, "2.750");
}

TEST(GlueProcessors, Qqp) {
  const auto p = make_processor("qqp");
  const auto train = p->train_examples(data_path("glue/QQP"));
  ASSERT_EQ(train.size(), 6u);
  EXPECT_EQ(train[0].guid, "train-201");  // the id column
  EXPECT_EQ(train[0].text_a, "How do I learn to cook rice?");
  EXPECT_EQ(train[0].text_b, "What is the best way to cook rice?");
  EXPECT_EQ(train[0].label, "1");
  EXPECT_EQ(train[1].label, "0");
  EXPECT_EQ(p->dev_examples(data_path("glue/QQP")).size(), 3u);
}

TEST(GlueProcessors, QnliRteWnli) {
  const auto qnli = make_processor("qnli")->train_examples(data_path("glue/QNLI"));
  ASSERT_EQ(qnli.size(), 4u);
  EXPECT_EQ(qnli[0].text_a, "When did the museum open?");  // the question first
  EXPECT_EQ(qnli[0].text_b, "The museum opened its doors in 1902.");
  EXPECT_EQ(qnli[1].label, "not_entailment");
  const auto rte = make_processor("rte")->dev_examples(data_path("glue/RTE"));
  ASSERT_EQ(rte.size(), 2u);
  EXPECT_EQ(rte[0].guid, "dev-0");
  EXPECT_EQ(rte[0].text_b, "The main road was flooded.");
  EXPECT_EQ(rte[0].label, "entailment");
  const auto wnli = make_processor("wnli")->train_examples(data_path("glue/WNLI"));
  ASSERT_EQ(wnli.size(), 4u);
  EXPECT_EQ(wnli[1].text_b, "The case was too big.");
  EXPECT_EQ(wnli[1].label, "0");
}

TEST(GlueProcessors, MnliEvaluatesMatchedAndMismatched) {
  const auto sets = make_processor("mnli")->eval_sets(data_path("glue/MNLI"));
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].suffix, "");
  EXPECT_EQ(sets[1].suffix, "_mm");
  ASSERT_EQ(sets[0].examples.size(), 2u);  // dev_matched.tsv
  ASSERT_EQ(sets[1].examples.size(), 3u);  // dev_mismatched.tsv
  EXPECT_EQ(sets[0].examples[0].guid, "dev_matched-0");
  EXPECT_EQ(sets[1].examples[1].guid, "dev_mismatched-1");
  EXPECT_EQ(sets[1].examples[1].text_a, "The report was released in the morning.");
  EXPECT_EQ(sets[1].examples[1].label, "neutral");  // gold_label, not label3
  // Other tasks have one evaluation set.
  EXPECT_EQ(make_processor("rte")->eval_sets(data_path("glue/RTE")).size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Format errors name the file, the line, the column or value, and what is expected

TEST(GlueErrors, StsbNonNumericScore) {
  TempDir dir;
  write_file(dir / "train.tsv",
             "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\t"
             "score\n"
             "0\tg\tf\t2012\t1\tnone\tnone\tA.\tB.\t4.0\n"
             "1\tg\tf\t2012\t2\tnone\tnone\tC.\tD.\tfour\n");
  const std::string message =
      error_of<DataError>([&] { make_processor("stsb")->train_examples(dir.path()); });
  expect_contains(message, {"train.tsv:3:", "\"four\"", "column 10", "not a number"});
}

TEST(GlueErrors, QqpMissingColumn) {
  TempDir dir;
  write_file(dir / "dev.tsv",
             "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
             "1\t2\t3\tWhy?\tHow?\t0\n"
             "4\t5\t6\tWhat?\tWhen?\n");
  const std::string message =
      error_of<DataError>([&] { make_processor("qqp")->dev_examples(dir.path()); });
  expect_contains(message, {"dev.tsv:3:", "at least 6", "is_duplicate", "found 5"});
}

TEST(GlueErrors, BadLabels) {
  TempDir dir;
  write_file(dir / "train.tsv", "sentence\tlabel\ngood \t1\nbad \tnegative\n");
  expect_contains(error_of<DataError>([&] { make_processor("sst2")->train_examples(dir.path()); }),
                  {"train.tsv:3:", "\"negative\"", "column 2", "0|1"});
  write_file(dir / "dev.tsv", "index\tquestion\tsentence\tlabel\n0\tQ?\tS.\tneutral\n");
  expect_contains(error_of<DataError>([&] { make_processor("qnli")->dev_examples(dir.path()); }),
                  {"dev.tsv:2:", "\"neutral\"", "entailment|not_entailment"});
}

TEST(GlueErrors, MnliMissingMismatchedFile) {
  TempDir dir;
  fs::copy_file(data_path("glue/MNLI/dev_matched.tsv"), dir / "dev_matched.tsv");
  const std::string message =
      error_of<DataError>([&] { make_processor("mnli")->eval_sets(dir.path()); });
  expect_contains(message, {(dir / "dev_mismatched.tsv").string(), "no such file"});
}

// ---------------------------------------------------------------------------------------------
// Generic formats

GenericFormatOptions review_options() {
  GenericFormatOptions g;
  g.train_file = "train.jsonl";
  g.dev_file = "dev.jsonl";
  g.text_a_column = "review";
  g.label_column = "stars";
  g.label_list = {"negative", "positive"};
  return g;
}

TEST(GenericFormat, JsonlReadsNamedKeys) {
  const GenericProcessor p("jsonl", review_options());
  const auto train = p.train_examples(data_path("glue/generic"));
  ASSERT_EQ(train.size(), 6u);  // the blank line is skipped
  EXPECT_EQ(train[0].guid, "train-0");
  EXPECT_EQ(train[0].text_a, "The soup was hot and tasty.");
  EXPECT_EQ(train[0].text_b, "");
  EXPECT_EQ(train[0].label, "positive");
  EXPECT_EQ(train[3].guid, "train-4");  // line 5: after the blank line 4
  EXPECT_EQ(train[3].label, "negative");
  EXPECT_EQ(p.dev_examples(data_path("glue/generic")).size(), 3u);
  EXPECT_EQ(p.metric_set(), MetricSet::kAccuracyAndF1);  // two labels
}

TEST(GenericFormat, JsonlIntegerLabelsAndRegressionNumbers) {
  TempDir dir;
  write_file(dir / "train.jsonl",
             "{\"a\": \"x\", \"b\": \"y\", \"l\": 1}\n{\"a\": \"z\", \"b\": \"w\", \"l\": 0}\n");
  GenericFormatOptions g;
  g.train_file = "train.jsonl";
  g.text_a_column = "a";
  g.text_b_column = "b";
  g.label_column = "l";
  g.label_list = {"0", "1"};
  const auto examples = GenericProcessor("jsonl", g).train_examples(dir.path());
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].text_b, "y");
  EXPECT_EQ(examples[0].label, "1");
  write_file(dir / "train.jsonl", "{\"a\": \"x\", \"l\": 2.5}\n{\"a\": \"z\", \"l\": \"0.25\"}\n");
  g.text_b_column.clear();
  g.label_list.clear();
  g.regression = true;
  const auto scores = GenericProcessor("jsonl", g).train_examples(dir.path());
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_DOUBLE_EQ(*parse_score(scores[0].label), 2.5);
  EXPECT_DOUBLE_EQ(*parse_score(scores[1].label), 0.25);
}

TEST(GenericFormat, JsonlErrorsNameFileAndLine) {
  TempDir dir;
  const GenericProcessor p("jsonl", review_options());
  const std::string ok = "{\"review\": \"Fine.\", \"stars\": \"positive\"}\n";
  write_file(dir / "train.jsonl", ok + "{\"review\": \"Broken\", \"stars\": \n");
  expect_contains(error_of<DataError>([&] { p.train_examples(dir.path()); }),
                  {"train.jsonl:2:", "not valid JSON", "one JSON object per line"});
  write_file(dir / "train.jsonl", "{\"review\": \"Big.\", \"stars\": 1e400}\n");
  expect_contains(error_of<DataError>([&] { p.train_examples(dir.path()); }),
                  {"train.jsonl:1:", "not valid JSON", "1e400"});
  write_file(dir / "train.jsonl", ok + "[1, 2]\n");
  expect_contains(error_of<DataError>([&] { p.train_examples(dir.path()); }),
                  {"train.jsonl:2:", "array", "JSON object"});
  write_file(dir / "train.jsonl", ok + ok + "{\"text\": \"Fine.\", \"stars\": \"positive\"}\n");
  expect_contains(error_of<DataError>([&] { p.train_examples(dir.path()); }),
                  {"train.jsonl:3:", "no key \"review\"", "text_a_column"});
  write_file(dir / "train.jsonl", "{\"review\": 5, \"stars\": \"positive\"}\n");
  expect_contains(error_of<DataError>([&] { p.train_examples(dir.path()); }),
                  {"train.jsonl:1:", "\"review\" is 5", "expected a string"});
  write_file(dir / "train.jsonl", "{\"review\": \"Meh.\", \"stars\": \"neutral\"}\n");
  expect_contains(error_of<DataError>([&] { p.train_examples(dir.path()); }),
                  {"train.jsonl:1:", "\"neutral\"", "\"stars\"", "negative|positive"});
  write_file(dir / "train.jsonl", "{\"review\": \"Meh.\", \"stars\": 0.5}\n");
  expect_contains(error_of<DataError>([&] { p.train_examples(dir.path()); }),
                  {"train.jsonl:1:", "0.5", "a string or an integer"});
}

TEST(GenericFormat, TsvByHeaderNames) {
  GenericFormatOptions g;
  g.train_file = "pairs.tsv";
  g.text_a_column = "left";
  g.text_b_column = "right";
  g.label_column = "score";
  g.regression = true;
  const GenericProcessor p("tsv", g);
  EXPECT_TRUE(p.is_regression());
  EXPECT_EQ(p.metric_set(), MetricSet::kPearsonSpearman);
  const auto examples = p.train_examples(data_path("glue/generic"));
  ASSERT_EQ(examples.size(), 3u);
  EXPECT_EQ(examples[1].guid, "train-2");
  EXPECT_EQ(examples[1].text_a, "A man rides a bike.");
  EXPECT_EQ(examples[1].text_b, "A bird sings.");
  EXPECT_EQ(examples[1].label, "0.5");
}

TEST(GenericFormat, TsvByIndexWithoutHeader) {
  TempDir dir;
  write_file(dir / "dev.tsv", "x\tfirst text\tpos\ny\tsecond text\tneg\n");
  GenericFormatOptions g;
  g.dev_file = "dev.tsv";
  g.text_a_column = "1";
  g.label_column = "2";
  g.label_list = {"neg", "pos"};
  g.header = false;
  const auto examples = GenericProcessor("tsv", g).dev_examples(dir.path());
  ASSERT_EQ(examples.size(), 2u);  // no row skipped
  EXPECT_EQ(examples[0].guid, "dev-0");
  EXPECT_EQ(examples[0].text_a, "first text");
  EXPECT_EQ(examples[1].label, "neg");
}

TEST(GenericFormat, TsvErrorsNameFileLineAndColumn) {
  TempDir dir;
  GenericFormatOptions g;
  g.train_file = "train.tsv";
  g.text_a_column = "sentence";
  g.label_column = "label";
  g.label_list = {"0", "1"};
  write_file(dir / "train.tsv", "text\tlabel\nhello\t1\n");
  expect_contains(
      error_of<DataError>([&] { GenericProcessor("tsv", g).train_examples(dir.path()); }),
      {"train.tsv:1:", "no column \"sentence\"", "text, label", "text_a_column"});
  write_file(dir / "train.tsv", "sentence\tlabel\nhello\t1\nshort\n");
  expect_contains(
      error_of<DataError>([&] { GenericProcessor("tsv", g).train_examples(dir.path()); }),
      {"train.tsv:3:", "at least 2", "found 1"});
  g.regression = true;
  g.label_list.clear();
  write_file(dir / "train.tsv", "sentence\tlabel\nhello\t1.5\nbye\tn/a\n");
  expect_contains(
      error_of<DataError>([&] { GenericProcessor("tsv", g).train_examples(dir.path()); }),
      {"train.tsv:3:", "\"n/a\"", "\"label\"", "not a number"});
}

TEST(GenericFormat, ParseScore) {
  EXPECT_DOUBLE_EQ(*parse_score("4.800"), 4.8);
  EXPECT_DOUBLE_EQ(*parse_score("-1e-1"), -0.1);
  for (const char* bad : {"", " 1", "1 ", "four", "1.2.3", "nan", "inf", "1e999"}) {
    EXPECT_FALSE(parse_score(bad).has_value()) << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// Options of the generic formats

TEST(GenericOptions, ReadsColumnsAndLabels) {
  const ClassifierOptions o = ClassifierOptions::from_config(
      task_view({{"task_name", std::string("jsonl")},
                 {"data_dir", std::string("/data")},
                 {"text_a_column", std::string("review")},
                 {"label_column", std::string("stars")},
                 {"label_list", std::string(" negative , positive ")}}));
  EXPECT_EQ(o.generic.train_file, "train.jsonl");  // defaults by format
  EXPECT_EQ(o.generic.dev_file, "dev.jsonl");
  EXPECT_EQ(o.generic.label_list, (std::vector<std::string>{"negative", "positive"}));
  EXPECT_FALSE(o.generic.regression);
}

TEST(GenericOptions, RulesAreConfigErrorsNamingTheKey) {
  auto error = [](std::map<std::string, OptionValue> values) {
    values.emplace("data_dir", std::string("/data"));
    return error_of<ConfigError>([&] { ClassifierOptions::from_config(task_view(values)); });
  };
  expect_contains(error({{"task_name", std::string("mrpc")}, {"label_column", std::string("x")}}),
                  {"task.label_column", "only used with task_name = \"tsv\" or \"jsonl\"", "mrpc"});
  expect_contains(error({{"task_name", std::string("tsv")},
                         {"label_column", std::string("l")},
                         {"label_list", std::string("a,b")}}),
                  {"task.text_a_column", "needs"});
  expect_contains(error({{"task_name", std::string("tsv")},
                         {"text_a_column", std::string("t")},
                         {"label_column", std::string("l")}}),
                  {"task.label_list", "regression = true"});
  expect_contains(error({{"task_name", std::string("tsv")},
                         {"text_a_column", std::string("t")},
                         {"label_column", std::string("l")},
                         {"regression", true},
                         {"label_list", std::string("a,b")}}),
                  {"task.label_list", "together with regression"});
  expect_contains(error({{"task_name", std::string("tsv")},
                         {"text_a_column", std::string("t")},
                         {"label_column", std::string("2")},
                         {"regression", true},
                         {"header", false}}),
                  {"task.text_a_column", "\"t\"", "0-based index"});
  expect_contains(error({{"task_name", std::string("jsonl")},
                         {"text_a_column", std::string("t")},
                         {"label_column", std::string("l")},
                         {"regression", true},
                         {"header", true}}),
                  {"task.header", "only task_name = \"tsv\""});
  expect_contains(error_of<ConfigError>([] { parse_label_list("a,,b"); }),
                  {"task.label_list", "empty label"});
  expect_contains(error_of<ConfigError>([] { parse_label_list("a,b,a"); }), {"label \"a\" twice"});
  expect_contains(error_of<ConfigError>([] { parse_label_list("only"); }), {"at least 2"});
}

// ---------------------------------------------------------------------------------------------
// Metrics against values computed here by other formulas

TEST(GlueMetrics, PearsonMatchesRawSums) {
  const std::vector<double> x = {1.0, 2.0, 3.0, 4.0, 5.0, 2.5};
  const std::vector<double> y = {2.0, 4.1, 5.0, 4.0, 5.5, 0.5};
  EXPECT_NEAR(pearson(x, y), pearson_by_sums(x, y), 1e-12);
  EXPECT_NEAR(pearson(x, x), 1.0, 1e-12);
  std::vector<double> negated(x.size());
  for (size_t i = 0; i < x.size(); ++i) negated[i] = -2.0 * x[i] + 3.0;
  EXPECT_NEAR(pearson(x, negated), -1.0, 1e-12);
  EXPECT_EQ(pearson(x, std::vector<double>(6, 1.0)), 0.0);  // constant side
  EXPECT_THROW(pearson({1.0}, {2.0}), Error);
}

TEST(GlueMetrics, AverageRanksShareTies) {
  EXPECT_EQ(average_ranks({10, 20, 20, 5}), (std::vector<double>{2, 3.5, 3.5, 1}));
  EXPECT_EQ(average_ranks({7, 7, 7}), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(average_ranks({3, 1, 2}), (std::vector<double>{3, 1, 2}));
}

TEST(GlueMetrics, SpearmanWithTiesIsPearsonOfAverageRanks) {
  const std::vector<double> x = {1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0};
  const std::vector<double> y = {0.3, 0.1, 0.5, 0.5, 0.9, 0.2, 0.9};
  // Ranks by hand: x → 1, 2.5, 2.5, 4, 6, 6, 6; y (0.1 < 0.2 < 0.3 < 0.5 = 0.5 < 0.9 = 0.9)
  // → 3, 1, 4.5, 4.5, 6.5, 2, 6.5.
  const std::vector<double> rx = {1, 2.5, 2.5, 4, 6, 6, 6};
  const std::vector<double> ry = {3, 1, 4.5, 4.5, 6.5, 2, 6.5};
  EXPECT_NEAR(spearman(x, y), pearson_by_sums(rx, ry), 1e-12);
  // Monotone but not linear: Spearman 1, Pearson below 1.
  const std::vector<double> a = {1, 2, 3, 4, 5};
  const std::vector<double> b = {1, 4, 9, 16, 100};
  EXPECT_NEAR(spearman(a, b), 1.0, 1e-12);
  EXPECT_LT(pearson(a, b), 0.99);
}

TEST(GlueMetrics, F1AndMatthewsByCounts) {
  // TP = 3, FP = 1, FN = 2, TN = 4.
  const std::vector<int64_t> pred = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
  const std::vector<int64_t> gold = {1, 1, 1, 0, 1, 1, 0, 0, 0, 0};
  EXPECT_NEAR(f1_score(pred, gold), 2.0 * 3 / (2.0 * 3 + 1 + 2), 1e-12);
  EXPECT_NEAR(matthews_corrcoef(pred, gold), (3.0 * 4 - 1.0 * 2) / std::sqrt(4.0 * 5 * 5 * 6),
              1e-12);
}

// ---------------------------------------------------------------------------------------------
// The task: regression head, MNLI's two sets, metric keys

BertConfig tiny_config() {
  BertConfig config;
  config.vocab_size = 30522;
  config.hidden_size = 8;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 2;
  config.intermediate_size = 16;
  config.max_position_embeddings = 64;
  config.type_vocab_size = 2;
  return config;
}

ClassifierTask prepared_task(const std::string& name, const std::string& dir,
                             const BertConfig& config) {
  ClassifierOptions options;
  options.task_name = name;
  options.data_dir = data_path(dir);
  options.max_seq_length = 24;
  ClassifierTask task(options);
  TaskContext ctx;
  ctx.bert_config = &config;
  ctx.tokenizer = &uncased_tokenizer();
  task.prepare(ctx);
  return task;
}

/// The model's outputs on `features`, one forward pass in eval mode.
at::Tensor outputs_of(torch::nn::Module& model, const std::vector<InputFeatures>& features,
                      bool regression) {
  auto& classifier = dynamic_cast<ClassifierModelImpl&>(model);
  classifier.eval();
  const at::NoGradGuard no_grad;
  std::vector<int64_t> all(features.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const Batch batch = collate(features, all, c10::Device(c10::kCPU), regression);
  return classifier.forward(batch.at("input_ids"), batch.at("segment_ids"), batch.at("input_mask"));
}

TEST(GlueTask, StsbIsRegressionWithMseLoss) {
  const BertConfig config = tiny_config();
  ClassifierTask task = prepared_task("stsb", "glue/STS-B", config);
  EXPECT_TRUE(task.is_regression());
  EXPECT_FLOAT_EQ(task.train_features()[0].label_value, 4.8F);
  at::manual_seed(3);
  auto model = task.create_model(config, false);
  const auto params = model->named_parameters();
  EXPECT_EQ(params["classifier.weight"].sizes(), (std::vector<int64_t>{1, 8}));  // one output

  const Batch batch = task.make_train_batch({0, 2}, c10::Device(c10::kCPU));
  ASSERT_TRUE(batch.count("label_values"));
  EXPECT_EQ(batch.at("label_values").scalar_type(), at::kFloat);
  model->eval();
  const at::Tensor logits = outputs_of(*model, task.train_features(), true);
  const double expected = (std::pow(logits[0][0].item<double>() - 4.8, 2) +
                           std::pow(logits[2][0].item<double>() - 0.5, 2)) /
                          2.0;
  EXPECT_NEAR(task.compute_loss(*model, batch).loss.item<double>(), expected, 1e-5);

  EvalContext ctx;
  ctx.eval_batch_size = 3;  // 4 dev examples: batches of 3 and 1
  const Metrics metrics = task.evaluate(*model, ctx);
  std::vector<std::string> keys;
  for (const auto& m : metrics) keys.push_back(m.first);
  EXPECT_EQ(keys, (std::vector<std::string>{"eval_loss", "eval_pearson", "eval_spearmanr",
                                            "eval_combined_score"}));
  const at::Tensor dev_out = outputs_of(*model, task.eval_features(), true);
  std::vector<double> predicted;
  const std::vector<double> gold = {5.0, 0.8, 4.4, 2.75};  // dev.tsv's scores
  double squared = 0;
  for (int64_t i = 0; i < 4; ++i) {
    predicted.push_back(dev_out[i][0].item<double>());
    squared += std::pow(predicted.back() - gold[i], 2);
  }
  EXPECT_NEAR(metrics[0].second, squared / 4, 1e-5);
  EXPECT_NEAR(metrics[1].second, pearson_by_sums(predicted, gold), 1e-4);
  EXPECT_NEAR(metrics[3].second, (metrics[1].second + metrics[2].second) / 2, 1e-12);
}

TEST(GlueTask, MnliReportsBothDevSets) {
  const BertConfig config = tiny_config();
  ClassifierTask task = prepared_task("mnli", "glue/MNLI", config);
  ASSERT_EQ(task.num_eval_sets(), 2u);
  at::manual_seed(5);
  auto model = task.create_model(config, false);
  const Metrics metrics = task.evaluate(*model, EvalContext{});
  std::map<std::string, double> by_key(metrics.begin(), metrics.end());
  ASSERT_EQ(metrics.size(), 4u);
  for (const char* key : {"eval_accuracy", "eval_loss", "eval_accuracy_mm", "eval_loss_mm"}) {
    EXPECT_TRUE(by_key.count(key)) << key;
  }
  // The mismatched accuracy, computed here from the model's argmax on dev_mismatched.tsv.
  ClassifierOptions options;
  options.task_name = "mnli";
  const auto mismatched = make_processor("mnli")->eval_sets(data_path("glue/MNLI"))[1].examples;
  const auto features = convert_examples(mismatched, task.labels(), 24, uncased_tokenizer());
  const at::Tensor predicted = outputs_of(*model, features, false).argmax(-1);
  int correct = 0;
  for (size_t i = 0; i < features.size(); ++i) {
    correct += predicted[static_cast<int64_t>(i)].item<int64_t>() == features[i].label_id ? 1 : 0;
  }
  EXPECT_DOUBLE_EQ(by_key["eval_accuracy_mm"], correct / 3.0);
}

TEST(GlueTask, QqpReportsF1AndCombinedScore) {
  const BertConfig config = tiny_config();
  ClassifierTask task = prepared_task("qqp", "glue/QQP", config);
  at::manual_seed(11);
  auto model = task.create_model(config, false);
  const Metrics metrics = task.evaluate(*model, EvalContext{});
  ASSERT_EQ(metrics.size(), 4u);
  EXPECT_EQ(metrics[2].first, "eval_f1");
  const at::Tensor predicted = outputs_of(*model, task.eval_features(), false).argmax(-1);
  const std::vector<int64_t> gold = {1, 0, 1};  // dev.tsv's is_duplicate
  int tp = 0, fp = 0, fn = 0;
  for (int64_t i = 0; i < 3; ++i) {
    const bool p = predicted[i].item<int64_t>() == 1;
    tp += p && gold[i] == 1 ? 1 : 0;
    fp += p && gold[i] == 0 ? 1 : 0;
    fn += !p && gold[i] == 1 ? 1 : 0;
  }
  const double f1 = tp + fp + fn == 0 ? 0.0 : 2.0 * tp / (2.0 * tp + fp + fn);
  EXPECT_DOUBLE_EQ(metrics[2].second, f1);
  EXPECT_DOUBLE_EQ(metrics[3].second, (metrics[0].second + f1) / 2);
}

TEST(GlueTask, EveryGlueTaskPreparesFromItsFixtures) {
  const BertConfig config = tiny_config();
  const std::map<std::string, std::string> dirs = {
      {"cola", "glue/CoLA"},  {"sst2", "glue/SST-2"}, {"mrpc", "glue/MRPC"},
      {"stsb", "glue/STS-B"}, {"qqp", "glue/QQP"},    {"mnli", "glue/MNLI"},
      {"qnli", "glue/QNLI"},  {"rte", "glue/RTE"},    {"wnli", "glue/WNLI"}};
  for (const auto& [name, dir] : dirs) {
    ClassifierTask task = prepared_task(name, dir, config);
    EXPECT_GT(task.num_train_examples(), 0) << name;
    EXPECT_FALSE(task.eval_features().empty()) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// End to end: the real `bertlab run`

/// Writes an experiment that trains the tiny model for a few steps on `task_body` ([task]
/// keys besides plugin) and returns its path.
fs::path write_experiment(const TempDir& dir, const std::string& name,
                          const std::string& task_body) {
  const std::string text = fmt::format(
      "[experiment]\nname = \"{}\"\nseed = 3\nthreads = 1\n\n"
      "[model]\nbert_config_file = \"{}\"\nvocab_file = \"{}\"\n\n"
      "[task]\nplugin = \"classifier\"\nmax_seq_length = 32\n{}\n\n"
      "[strategy]\nplugin = \"single\"\n\n"
      "[optimizer]\nplugin = \"adam_weight_decay\"\nlearning_rate = 1e-3\n\n"
      "[train]\ntrain_batch_size = 2\nnum_train_steps = 4\nlog_every_steps = 2\n\n"
      "[[variant]]\nname = \"only\"\n",
      name, data_path("experiments/bert_config_tiny.json").string(),
      data_path("vocab/bert-base-uncased/vocab.txt").string(), task_body);
  fs::path path = dir / (name + ".toml");
  write_file(path, text);
  return path;
}

nlohmann::json run_and_read_results(const TempDir& dir, const fs::path& experiment,
                                    const std::string& name) {
  const auto result =
      run_bertlab({"run", experiment.string(), "--output-dir", (dir / "runs").string()});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const fs::path results = dir / "runs" / name / "only" / "eval_results.json";
  if (!fs::is_regular_file(results)) {
    ADD_FAILURE() << "no " << results << "\n" << result.err;
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(read_file(results));
}

TEST(GlueEndToEnd, StsbRegressionWritesCorrelations) {
  TempDir dir;
  const auto path = write_experiment(
      dir, "stsb",
      fmt::format("task_name = \"sts-b\"\ndata_dir = \"{}\"", data_path("glue/STS-B").string()));
  const nlohmann::json results = run_and_read_results(dir, path, "stsb");
  for (const char* key : {"eval_loss", "eval_pearson", "eval_spearmanr", "eval_combined_score"}) {
    ASSERT_TRUE(results.contains(key)) << key << " " << results.dump();
  }
  EXPECT_FALSE(results.contains("eval_accuracy")) << results.dump();
  EXPECT_GE(results["eval_loss"].get<double>(), 0.0);
  for (const char* key : {"eval_pearson", "eval_spearmanr"}) {
    EXPECT_LE(std::abs(results[key].get<double>()), 1.0 + 1e-9) << key;
  }
}

TEST(GlueEndToEnd, MnliWritesMatchedAndMismatched) {
  TempDir dir;
  const auto path = write_experiment(
      dir, "mnli",
      fmt::format("task_name = \"mnli\"\ndata_dir = \"{}\"", data_path("glue/MNLI").string()));
  const nlohmann::json results = run_and_read_results(dir, path, "mnli");
  for (const char* key : {"eval_accuracy", "eval_loss", "eval_accuracy_mm", "eval_loss_mm"}) {
    ASSERT_TRUE(results.contains(key)) << key << " " << results.dump();
  }
  // Three mismatched examples: the accuracy is a multiple of 1/3.
  const double mm = results["eval_accuracy_mm"].get<double>() * 3.0;
  EXPECT_NEAR(mm, std::round(mm), 1e-9);
}

TEST(GlueEndToEnd, GenericJsonl) {
  TempDir dir;
  const auto path = write_experiment(
      dir, "reviews",
      fmt::format("task_name = \"jsonl\"\ndata_dir = \"{}\"\ntext_a_column = \"review\"\n"
                  "label_column = \"stars\"\nlabel_list = \"negative,positive\"",
                  data_path("glue/generic").string()));
  const nlohmann::json results = run_and_read_results(dir, path, "reviews");
  for (const char* key : {"eval_accuracy", "eval_loss", "eval_f1", "eval_combined_score"}) {
    ASSERT_TRUE(results.contains(key)) << key << " " << results.dump();
  }
  const double correct = results["eval_accuracy"].get<double>() * 3.0;  // 3 dev examples
  EXPECT_NEAR(correct, std::round(correct), 1e-9);
}

TEST(GlueEndToEnd, ConfigErrorsExitTwo) {
  TempDir dir;
  const auto missing_labels = write_experiment(
      dir, "nolabels",
      fmt::format("task_name = \"jsonl\"\ndata_dir = \"{}\"\ntext_a_column = \"review\"\n"
                  "label_column = \"stars\"",
                  data_path("glue/generic").string()));
  auto result = run_bertlab({"run", missing_labels.string(), "--output-dir", dir.path().string()});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  expect_contains(result.err, {"task.label_list"});
  const auto stray_key = write_experiment(
      dir, "stray",
      fmt::format("task_name = \"rte\"\ndata_dir = \"{}\"\nlabel_column = \"label\"",
                  data_path("glue/RTE").string()));
  result = run_bertlab({"run", stray_key.string(), "--output-dir", dir.path().string()});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  expect_contains(result.err, {"task.label_column", "only used with"});
}

TEST(GlueEndToEnd, BadDataLineExitsOneNamingIt) {
  TempDir dir;
  fs::create_directories(dir / "data");
  write_file(dir / "data" / "train.jsonl",
             "{\"t\": \"a\", \"l\": \"x\"}\n{\"t\": \"b\", \"l\": }\n");
  write_file(dir / "data" / "dev.jsonl", "{\"t\": \"a\", \"l\": \"x\"}\n");
  const auto path = write_experiment(
      dir, "bad",
      fmt::format("task_name = \"jsonl\"\ndata_dir = \"{}\"\ntext_a_column = \"t\"\n"
                  "label_column = \"l\"\nlabel_list = \"x,y\"",
                  (dir / "data").string()));
  const auto result = run_bertlab({"run", path.string(), "--output-dir", dir.path().string()});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  expect_contains(result.err, {"train.jsonl:2:", "not valid JSON"});
}

}  // namespace
}  // namespace bertlab::classifier

namespace bertlab::classifier {
namespace {

// ---------------------------------------------------------------------------------------------
// TREC question classification, from the bundled CogComp files

fs::path trec_dir() { return fs::path(BERTLAB_SOURCE_DIR) / "experiments" / "data" / "TREC"; }

TEST(Trec, ReadsTheBundledFilesWithHuggingFacesLabels) {
  const auto coarse = make_processor("trec");
  const auto train = coarse->train_examples(trec_dir());
  const auto test = coarse->dev_examples(trec_dir());
  ASSERT_EQ(train.size(), 5452u);
  ASSERT_EQ(test.size(), 500u);
  EXPECT_EQ(coarse->labels(),
            (std::vector<std::string>{"ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"}));
  EXPECT_EQ(coarse->metric_set(), MetricSet::kAccuracy);
  EXPECT_EQ(train[0].guid, "train-0");
  EXPECT_EQ(train[0].label, "DESC");
  EXPECT_EQ(train[0].text_a, "How did serfdom develop in and then leave Russia ?");
  EXPECT_EQ(test[0].label, "NUM");
  EXPECT_EQ(test[0].text_a, "How far is it from Denver to Aspen ?");
  // The majority class of the test set, DESC, is 138 of 500 (0.276).
  int64_t desc = 0;
  for (const auto& e : test) desc += e.label == "DESC" ? 1 : 0;
  EXPECT_EQ(desc, 138);
  // Line 66's raw 0xF0 byte is dropped, as Google's convert_to_unicode drops it.
  EXPECT_NE(train[65].text_a.find("a sistercity with Los Angeles ?"), std::string::npos)
      << train[65].text_a;

  const ClassifierOptions options =
      ClassifierOptions::from_config(task_view({{"task_name", std::string("trec")},
                                                {"data_dir", trec_dir().string()},
                                                {"trec_labels", std::string("fine")}}));
  const auto fine = make_processor(options);
  ASSERT_EQ(fine->labels().size(), 50u);
  EXPECT_EQ(fine->labels().front(), "ABBR:abb");
  EXPECT_EQ(fine->labels().back(), "NUM:weight");
  const auto fine_train = fine->train_examples(trec_dir());
  EXPECT_EQ(fine_train[0].label, "DESC:manner");
  EXPECT_EQ(fine_train[0].text_a, train[0].text_a);
}

// The real executable on the bundled files: the fine labels, an accuracy over the test
// questions, and line 66's byte reported once, naming the file and the line.
TEST(Trec, RunsEndToEndWithTheFineLabels) {
  TempDir dir;
  const auto path = write_experiment(
      dir, "trec",
      fmt::format("task_name = \"trec\"\ndata_dir = \"{}\"\ntrec_labels = \"fine\"\n"
                  "max_eval_examples = 100",
                  trec_dir().string()));
  const auto result = run_bertlab({"run", path.string(), "--output-dir", (dir / "runs").string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string warning = "train_5500.label:66: not valid UTF-8";
  const size_t first = result.err.find(warning);
  EXPECT_NE(first, std::string::npos) << result.err;
  EXPECT_EQ(result.err.find(warning, first + 1), std::string::npos) << result.err;
  expect_contains(result.err, {"trec: max_seq_length 32, 50 labels"});
  const auto results =
      nlohmann::json::parse(read_file(dir / "runs" / "trec" / "only" / "eval_results.json"));
  ASSERT_TRUE(results.contains("eval_accuracy")) << results.dump();
  const double correct = results["eval_accuracy"].get<double>() * 100.0;
  EXPECT_NEAR(correct, std::round(correct), 1e-9);
}

// The floor beside every comparison: the most frequent *training* label (TREC: ENTY, 1,250 of
// 5,452) answered for every test question, scored as evaluate() scores; MRPC's adds F1.
TEST(Trec, TheFloorIsTheMajorityTrainingLabelScoredOnTheTestSet) {
  ClassifierOptions options;
  options.task_name = "trec";
  options.data_dir = trec_dir();
  options.max_seq_length = 32;
  ClassifierTask task(options);
  TaskContext ctx;
  ctx.tokenizer = &uncased_tokenizer();
  task.prepare(ctx);
  std::map<std::string, int64_t> train_counts;
  for (const auto& e : make_processor("trec")->train_examples(trec_dir())) ++train_counts[e.label];
  EXPECT_EQ(train_counts["ENTY"], 1250);
  for (const auto& [label, n] : train_counts) EXPECT_LE(n, train_counts["ENTY"]) << label;
  int64_t enty = 0;
  for (const auto& e : make_processor("trec")->dev_examples(trec_dir())) {
    enty += e.label == "ENTY" ? 1 : 0;
  }
  const FloorMetrics floor = task.floor_metrics();
  EXPECT_EQ(floor.name, "majority class (ENTY)");
  ASSERT_EQ(floor.metrics.size(), 1u);
  EXPECT_EQ(floor.metrics[0].first, "eval_accuracy");
  EXPECT_DOUBLE_EQ(floor.metrics[0].second, static_cast<double>(enty) / 500.0);

  const BertConfig config = tiny_config();
  const ClassifierTask mrpc = prepared_task("mrpc", "glue/MRPC", config);
  int64_t positive_train = 0;
  for (const auto& f : mrpc.train_features()) positive_train += f.label_id;
  const auto negative_train = static_cast<int64_t>(mrpc.train_features().size()) - positive_train;
  const int64_t majority = positive_train > negative_train ? 1 : 0;  // a tie: the lowest id
  int64_t correct = 0, positive_eval = 0;
  for (const auto& f : mrpc.eval_features()) {
    correct += f.label_id == majority ? 1 : 0;
    positive_eval += f.label_id;
  }
  const auto n = static_cast<double>(mrpc.eval_features().size());
  const FloorMetrics mrpc_floor = mrpc.floor_metrics();
  EXPECT_EQ(mrpc_floor.name, "majority class (" + mrpc.labels()[majority] + ")");
  ASSERT_EQ(mrpc_floor.metrics.size(), 3u);
  EXPECT_DOUBLE_EQ(mrpc_floor.metrics[0].second, static_cast<double>(correct) / n);
  // F1 of always "1": 2·P/(2·P + N − P), where P of the N evaluation pairs are paraphrases.
  const double f1 = majority == 1 ? 2.0 * positive_eval / (positive_eval + n) : 0.0;
  EXPECT_EQ(mrpc_floor.metrics[1].first, "eval_f1");
  EXPECT_DOUBLE_EQ(mrpc_floor.metrics[1].second, f1);
  // Regression has no floor.
  EXPECT_TRUE(prepared_task("stsb", "glue/STS-B", config).floor_metrics().name.empty());
}

// GLUE SST-2 as bundled (experiments/data/SST-2): every phrase and sentence, header skipped.
TEST(GlueProcessors, Sst2ReadsTheBundledFiles) {
  const fs::path dir = fs::path(BERTLAB_SOURCE_DIR) / "experiments" / "data" / "SST-2";
  const auto p = make_processor("sst2");
  EXPECT_EQ(p->train_examples(dir).size(), 67349u);
  const auto dev = p->dev_examples(dir);
  ASSERT_EQ(dev.size(), 872u);
  int64_t positive = 0;
  for (const auto& e : dev) positive += e.label == "1" ? 1 : 0;
  EXPECT_EQ(positive, 444);
}

TEST(Trec, InvalidUtf8IsDroppedByteByByteAsPythonIgnores) {
  size_t dropped = 0;
  EXPECT_EQ(drop_invalid_utf8("sister\xF0"
                              "city",
                              dropped),
            "sistercity");
  EXPECT_EQ(dropped, 1u);
  // A truncated three-byte sequence: Python drops both bytes as one maximal subpart.
  EXPECT_EQ(drop_invalid_utf8("a\xE2\x82"
                              "b",
                              dropped),
            "ab");
  EXPECT_EQ(dropped, 2u);
  EXPECT_EQ(drop_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC", dropped), "caf\xC3\xA9 \xE2\x82\xAC");
  EXPECT_EQ(dropped, 0u);
}

TEST(Trec, ErrorsNameTheFileTheLineAndTheKey) {
  TempDir dir;
  write_file(dir / "train_5500.label", "DESC:manner How ?\nno label here\n");
  write_file(dir / "TREC_10.label", "XYZ:abc What ?\n");
  const auto p = make_processor("trec");
  expect_contains(error_of<DataError>([&] { p->train_examples(dir.path()); }),
                  {"train_5500.label:2", "COARSE:fine question"});
  expect_contains(error_of<DataError>([&] { p->dev_examples(dir.path()); }),
                  {"TREC_10.label:1", "\"XYZ\"", "6 coarse labels"});
  expect_contains(error_of<DataError>([&] { p->train_examples(dir / "missing"); }),
                  {"missing/train_5500.label", "cannot read"});
  expect_contains(
      error_of<ConfigError>([&] {
        ClassifierOptions::from_config(task_view({{"task_name", std::string("mrpc")},
                                                  {"data_dir", std::string("/data")},
                                                  {"trec_labels", std::string("fine")}}));
      }),
      {"task.trec_labels", "only used with task_name = \"trec\"", "mrpc"});
}

}  // namespace
}  // namespace bertlab::classifier
