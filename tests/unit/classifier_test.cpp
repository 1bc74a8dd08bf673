// Tests of the classifier plugin's internals: Google run_classifier.py's processors, feature
// conversion, metrics, the model head and the Task.

#include "classifier.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/model/bert.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "batching.h"
#include "classifier_model.h"
#include "input_features.h"
#include "metrics.h"
#include "options.h"
#include "processors.h"
#include "test_util.h"
#include "tsv_reader.h"

namespace bertlab::classifier {
namespace {

using bertlab::testing::data_path;
using bertlab::testing::TempDir;
using bertlab::testing::write_file;

// ---------------------------------------------------------------------------------------------
// Helpers

/// Runs `fn`, expects a DataError, returns its message.
template <typename Fn>
std::string data_error_of(Fn fn) {
  try {
    fn();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DataError thrown";
  return "";
}

std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::vector<int64_t> split_ids(const std::string& line) {
  std::vector<int64_t> ids;
  for (const std::string& w : split_words(line)) ids.push_back(std::stoll(w));
  return ids;
}

const FullTokenizer& uncased_tokenizer() {
  static const FullTokenizer tokenizer(data_path("vocab/bert-base-uncased/vocab.txt"), true);
  return tokenizer;
}

constexpr int64_t kCls = 101;  // [CLS] in bert-base-uncased
constexpr int64_t kSep = 102;  // [SEP]

// ---------------------------------------------------------------------------------------------
// TSV reading

TEST(ClassifierTsv, NoQuoteProcessing) {
  const auto rows = parse_tsv("a\t\"b\tc\"\n\"unclosed\td\n");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string>{"a", "\"b", "c\""}));
  EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"\"unclosed", "d"}));
}

TEST(ClassifierTsv, LinesAndEmptyFields) {
  // As Python's csv.reader: "\r\n" and a lone "\r" end a record, an empty line has no fields,
  // a trailing tab makes an empty last field, the last line needs no terminator.
  const auto rows = parse_tsv("a\tb\r\n\nc\t\nd\re");
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(rows[1].fields.empty());
  EXPECT_EQ(rows[2].fields, (std::vector<std::string>{"c", ""}));
  EXPECT_EQ(rows[3].fields, (std::vector<std::string>{"d"}));
  EXPECT_EQ(rows[4].fields, (std::vector<std::string>{"e"}));
  EXPECT_EQ(rows[4].line, 5);
}

TEST(ClassifierTsv, DropsLeadingBom) {
  const auto rows = parse_tsv("\xEF\xBB\xBFQuality\t#1 ID\nx\n");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].fields[0], "Quality");
  EXPECT_EQ(rows[0].line, 1);
}

TEST(ClassifierTsv, MissingFileNamesPath) {
  TempDir dir;
  const std::string message = data_error_of([&] { read_tsv(dir / "absent.tsv"); });
  EXPECT_NE(message.find((dir / "absent.tsv").string()), std::string::npos) << message;
}

TEST(ClassifierTsv, InvalidUtf8NamesLine) {
  TempDir dir;
  write_file(dir / "bad.tsv", "ok\tfine\nsecond\nthird \xFF byte\n");
  const std::string message = data_error_of([&] { read_tsv(dir / "bad.tsv"); });
  EXPECT_NE(message.find("bad.tsv:3:"), std::string::npos) << message;
  write_file(dir / "crlf.tsv", "a\r\nb\r\n\xC3(\r\n");
  const std::string crlf = data_error_of([&] { read_tsv(dir / "crlf.tsv"); });
  EXPECT_NE(crlf.find("crlf.tsv:3:"), std::string::npos) << crlf;
}

// ---------------------------------------------------------------------------------------------
// Processors on the real GLUE files

TEST(ClassifierProcessors, Mrpc) {
  const auto processor = make_processor("mrpc");
  EXPECT_EQ(processor->labels(), (std::vector<std::string>{"0", "1"}));
  const auto train = processor->train_examples(data_path("glue/MRPC"));
  const auto dev = processor->dev_examples(data_path("glue/MRPC"));
  ASSERT_EQ(train.size(), 3668u);
  ASSERT_EQ(dev.size(), 408u);
  EXPECT_EQ(train[0].guid, "train-1");
  EXPECT_EQ(train[0].label, "1");
  EXPECT_EQ(train[0].text_a,
            "Amrozi accused his brother, whom he called \"the witness\", of deliberately "
            "distorting his evidence.");
  EXPECT_EQ(train[0].text_b,
            "Referring to him as only \"the witness\", Amrozi accused his brother of "
            "deliberately distorting his evidence.");
  EXPECT_EQ(train.back().guid, "train-3668");
  EXPECT_EQ(train.back().label, "0");
  EXPECT_EQ(dev[0].guid, "dev-1");
  // An unbalanced quote stays a plain character (quotechar=None): it must not swallow lines.
  EXPECT_EQ(dev[0].text_b,
            "\"The foodservice pie business does not fit our long-term growth "
            "strategy.");
  int positives = 0;
  for (const auto& e : train) positives += e.label == "1" ? 1 : 0;
  EXPECT_EQ(positives, 2474);
}

TEST(ClassifierProcessors, Cola) {
  const auto processor = make_processor("cola");
  const auto train = processor->train_examples(data_path("glue/CoLA"));
  const auto dev = processor->dev_examples(data_path("glue/CoLA"));
  ASSERT_EQ(train.size(), 8551u);  // no header row
  ASSERT_EQ(dev.size(), 1043u);    // the last line has no newline
  EXPECT_EQ(train[0].guid, "train-0");
  EXPECT_EQ(train[0].label, "1");
  EXPECT_EQ(train[0].text_a,
            "Our friends won't buy this analysis, let alone the next one we propose.");
  EXPECT_EQ(train[0].text_b, "");
  EXPECT_EQ(dev.back().guid, "dev-1042");
  EXPECT_EQ(dev.back().text_a, "John talked to Bill about himself.");
}

TEST(ClassifierProcessors, Mnli) {
  const auto processor = make_processor("mnli");
  EXPECT_EQ(processor->labels(),
            (std::vector<std::string>{"contradiction", "entailment", "neutral"}));
  const auto train = processor->train_examples(data_path("glue/MNLI"));
  ASSERT_EQ(train.size(), 3u);
  EXPECT_EQ(train[0].guid, "train-0");
  EXPECT_EQ(train[0].text_a, "The committee met twice in the spring.");
  EXPECT_EQ(train[0].text_b, "The committee never met.");
  EXPECT_EQ(train[0].label, "contradiction");
  EXPECT_EQ(train[2].label, "neutral");
  const auto dev = processor->dev_examples(data_path("glue/MNLI"));  // dev_matched.tsv
  ASSERT_EQ(dev.size(), 2u);
  EXPECT_EQ(dev[0].guid, "dev_matched-0");
  EXPECT_EQ(dev[0].label, "contradiction");  // the last column, not label1..label5
  EXPECT_EQ(dev[1].text_a, "The island can be reached only by ferry.");
  EXPECT_EQ(dev[1].label, "entailment");
}

TEST(ClassifierProcessors, Xnli) {
  const auto processor = make_processor("xnli");
  const auto train = processor->train_examples(data_path("glue/XNLI"));
  ASSERT_EQ(train.size(), 3u);
  EXPECT_EQ(train[0].guid, "train-1");
  EXPECT_EQ(train[0].label, "contradiction");  // "contradictory" in the file
  EXPECT_EQ(train[0].text_a, "委员会在春天开了两次会。");
  EXPECT_EQ(train[0].text_b, "委员会从未开过会。");
  const auto dev = processor->dev_examples(data_path("glue/XNLI"));
  ASSERT_EQ(dev.size(), 2u);        // only the "zh" rows
  EXPECT_EQ(dev[0].guid, "dev-2");  // row index over all languages
  EXPECT_EQ(dev[0].text_a, "博物馆六点关门。");
  EXPECT_EQ(dev[0].label, "contradiction");
  EXPECT_EQ(dev[1].guid, "dev-4");
  EXPECT_EQ(dev[1].label, "entailment");
}

TEST(ClassifierProcessors, UnknownTaskIsConfigError) {
  EXPECT_THROW(make_processor("sst3"), ConfigError);
}

// ---------------------------------------------------------------------------------------------
// Processors on malformed files

TEST(ClassifierProcessors, TooFewColumnsNamesFileAndLine) {
  TempDir dir;
  write_file(dir / "train.tsv",
             "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
             "1\t1\t2\tA sentence.\tAnother.\n"
             "0\t3\t4\tonly four columns\n");
  const std::string message =
      data_error_of([&] { make_processor("mrpc")->train_examples(dir.path()); });
  EXPECT_NE(message.find("train.tsv:3:"), std::string::npos) << message;
  EXPECT_NE(message.find("found 4"), std::string::npos) << message;
}

TEST(ClassifierProcessors, UnknownLabelNamesFileAndLine) {
  TempDir dir;
  write_file(dir / "dev.tsv", "gj04\t1\t\tGood.\ngj04\t2\t\tBad label.\n");
  const std::string message =
      data_error_of([&] { make_processor("cola")->dev_examples(dir.path()); });
  EXPECT_NE(message.find("dev.tsv:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("\"2\""), std::string::npos) << message;
}

TEST(ClassifierProcessors, EmptyLineIsAnError) {
  TempDir dir;
  write_file(dir / "train.tsv", "gj04\t1\t\tGood.\n\ngj04\t0\t\tAlso good.\n");
  const std::string message =
      data_error_of([&] { make_processor("cola")->train_examples(dir.path()); });
  EXPECT_NE(message.find("train.tsv:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("found 0"), std::string::npos) << message;
}

TEST(ClassifierProcessors, MnliNeedsGoldLabelColumn) {
  TempDir dir;
  write_file(dir / "train.tsv",
             "index\tpromptID\tpairID\tgenre\tb1\tb2\tp1\tp2\ts1\ts2\tgold_label\n"
             "0\t1\t1e\tfiction\t-\t-\t-\t-\tA.\tB.\n");
  const std::string message =
      data_error_of([&] { make_processor("mnli")->train_examples(dir.path()); });
  EXPECT_NE(message.find("train.tsv:2:"), std::string::npos) << message;
}

TEST(ClassifierProcessors, MissingDevFileNamesPath) {
  TempDir dir;
  const std::string message =
      data_error_of([&] { make_processor("xnli")->dev_examples(dir.path()); });
  EXPECT_NE(message.find((dir / "xnli.dev.tsv").string()), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------
// Feature conversion

std::vector<std::string> letters(const std::string& s) {
  std::vector<std::string> out;
  for (char c : s) out.emplace_back(1, c);
  return out;
}

TEST(ClassifierFeatures, TruncatesTheLongerSequence) {
  auto a = letters("abcde");
  auto b = letters("xyz");
  truncate_seq_pair(a, b, 6);
  EXPECT_EQ(a, letters("abc"));
  EXPECT_EQ(b, letters("xyz"));

  a = letters("ab");
  b = letters("uvwxyz");
  truncate_seq_pair(a, b, 4);
  EXPECT_EQ(a, letters("ab"));
  EXPECT_EQ(b, letters("uv"));
}

TEST(ClassifierFeatures, TiesPopFromB) {
  auto a = letters("abc");
  auto b = letters("xyz");
  truncate_seq_pair(a, b, 5);
  EXPECT_EQ(a, letters("abc"));
  EXPECT_EQ(b, letters("xy"));
  truncate_seq_pair(a, b, 2);
  EXPECT_EQ(a, letters("a"));
  EXPECT_EQ(b, letters("x"));
}

TEST(ClassifierFeatures, ShortPairIsUnchanged) {
  auto a = letters("ab");
  auto b = letters("x");
  truncate_seq_pair(a, b, 3);
  EXPECT_EQ(a, letters("ab"));
  EXPECT_EQ(b, letters("x"));
}

TEST(ClassifierFeatures, PacksPair) {
  const PackedTokens packed = pack_tokens(letters("xy"), letters("z"), 10);
  EXPECT_EQ(packed.tokens, (std::vector<std::string>{"[CLS]", "x", "y", "[SEP]", "z", "[SEP]"}));
  EXPECT_EQ(packed.segment_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
}

TEST(ClassifierFeatures, PacksSingleSequenceWithTwoSlotsReserved) {
  const PackedTokens packed = pack_tokens(letters("abcd"), {}, 5);
  EXPECT_EQ(packed.tokens, (std::vector<std::string>{"[CLS]", "a", "b", "c", "[SEP]"}));
  EXPECT_EQ(packed.segment_ids, (std::vector<int64_t>(5, 0)));
}

TEST(ClassifierFeatures, PairReservesThreeSlots) {
  const PackedTokens packed = pack_tokens(letters("abcd"), letters("xy"), 6);
  EXPECT_EQ(packed.tokens, (std::vector<std::string>{"[CLS]", "a", "b", "[SEP]", "x", "[SEP]"}));
  EXPECT_THROW(pack_tokens(letters("a"), {}, 2), Error);
}

TEST(ClassifierFeatures, MatchesGoogleTokenizerOnMrpcDev) {
  // features/mrpc_dev_head.*: text_a and text_b of the first 8 MRPC dev examples, and what
  // Google's tokenization.py makes of them (see tests/data/glue/README.md).
  const auto texts = read_lines(data_path("glue/features/mrpc_dev_head.txt"));
  const auto tokens = read_lines(data_path("glue/features/mrpc_dev_head.tokens"));
  const auto ids = read_lines(data_path("glue/features/mrpc_dev_head.ids"));
  ASSERT_EQ(texts.size(), 16u);
  ASSERT_EQ(tokens.size(), 16u);
  ASSERT_EQ(ids.size(), 16u);
  const auto dev = make_processor("mrpc")->dev_examples(data_path("glue/MRPC"));
  const std::vector<std::string> labels{"0", "1"};
  const FullTokenizer& tokenizer = uncased_tokenizer();
  for (size_t i = 0; i < 8; ++i) {
    SCOPED_TRACE("example " + dev[i].guid);
    ASSERT_EQ(dev[i].text_a, texts[2 * i]);
    ASSERT_EQ(dev[i].text_b, texts[2 * i + 1]);
    EXPECT_EQ(tokenizer.tokenize(dev[i].text_a), split_words(tokens[2 * i]));
    EXPECT_EQ(tokenizer.tokenize(dev[i].text_b), split_words(tokens[2 * i + 1]));

    const auto ids_a = split_ids(ids[2 * i]);
    const auto ids_b = split_ids(ids[2 * i + 1]);
    std::vector<int64_t> expected{kCls};
    expected.insert(expected.end(), ids_a.begin(), ids_a.end());
    expected.push_back(kSep);
    expected.insert(expected.end(), ids_b.begin(), ids_b.end());
    expected.push_back(kSep);
    const size_t length = expected.size();
    expected.resize(128, 0);

    const InputFeatures f = convert_single_example(dev[i], labels, 128, tokenizer);
    EXPECT_EQ(f.input_ids, expected);
    std::vector<int64_t> mask(128, 0);
    std::fill(mask.begin(), mask.begin() + length, 1);
    EXPECT_EQ(f.input_mask, mask);
    std::vector<int64_t> segments(128, 0);
    std::fill(segments.begin() + ids_a.size() + 2, segments.begin() + length, 1);
    EXPECT_EQ(f.segment_ids, segments);
    EXPECT_EQ(f.label_id, dev[i].label == "1" ? 1 : 0);
  }
}

TEST(ClassifierFeatures, TruncatesRealPair) {
  // dev-1 has 23 + 18 tokens; max_seq_length 16 leaves 13: the longer side is cut until both
  // reach 7, then the tie drops from b, leaving 7 + 6.
  const auto ids = read_lines(data_path("glue/features/mrpc_dev_head.ids"));
  const auto ids_a = split_ids(ids[0]);
  const auto ids_b = split_ids(ids[1]);
  ASSERT_EQ(ids_a.size(), 23u);
  ASSERT_EQ(ids_b.size(), 18u);
  const auto dev = make_processor("mrpc")->dev_examples(data_path("glue/MRPC"));
  const InputFeatures f = convert_single_example(dev[0], {"0", "1"}, 16, uncased_tokenizer());
  std::vector<int64_t> expected{kCls};
  expected.insert(expected.end(), ids_a.begin(), ids_a.begin() + 7);
  expected.push_back(kSep);
  expected.insert(expected.end(), ids_b.begin(), ids_b.begin() + 6);
  expected.push_back(kSep);
  EXPECT_EQ(f.input_ids, expected);
  EXPECT_EQ(f.input_mask, std::vector<int64_t>(16, 1));
  EXPECT_EQ(f.segment_ids, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1}));
}

TEST(ClassifierFeatures, SingleSequenceCut) {
  // CoLA train-0, "our friends won ' t buy ...": max_seq_length 8 keeps 6 tokens.
  const InputExample example{
      "train-0", "Our friends won't buy this analysis, let alone the next one.", "", "1"};
  const FullTokenizer& tokenizer = uncased_tokenizer();
  const InputFeatures f = convert_single_example(example, {"0", "1"}, 8, tokenizer);
  EXPECT_EQ(tokenizer.convert_ids_to_tokens(f.input_ids),
            (std::vector<std::string>{"[CLS]", "our", "friends", "won", "'", "t", "buy", "[SEP]"}));
  EXPECT_EQ(f.segment_ids, std::vector<int64_t>(8, 0));
  EXPECT_EQ(f.label_id, 1);
}

TEST(ClassifierFeatures, TextBThatTokenizesToNothingIsSingleSequence) {
  // Google's `if tokens_b:`: a text_b of only whitespace gives no second segment.
  const InputExample example{"x", "hello world", " \t ", "0"};
  const InputFeatures f = convert_single_example(example, {"0", "1"}, 6, uncased_tokenizer());
  EXPECT_EQ(uncased_tokenizer().convert_ids_to_tokens(f.input_ids),
            (std::vector<std::string>{"[CLS]", "hello", "world", "[SEP]", "[PAD]", "[PAD]"}));
  EXPECT_EQ(f.segment_ids, std::vector<int64_t>(6, 0));
  EXPECT_EQ(f.input_mask, (std::vector<int64_t>{1, 1, 1, 1, 0, 0}));
}

TEST(ClassifierFeatures, UnknownLabelIsDataError) {
  const InputExample example{"dev-7", "a", "b", "maybe"};
  const std::string message = data_error_of([&] {
    convert_single_example(example, {"0", "1"}, 8, uncased_tokenizer());
  });
  EXPECT_NE(message.find("dev-7"), std::string::npos) << message;
}

TEST(ClassifierFeatures, CollatesByIndex) {
  std::vector<InputFeatures> features(3);
  for (int64_t i = 0; i < 3; ++i) {
    features[i].input_ids = {kCls, 1000 + i, kSep, 0};
    features[i].input_mask = {1, 1, 1, 0};
    features[i].segment_ids = {0, 0, 0, 0};
    features[i].label_id = i % 2;
  }
  const Batch batch = collate(features, {2, 0}, c10::Device(c10::kCPU));
  ASSERT_EQ(batch.at("input_ids").sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(batch.at("input_ids").scalar_type(), at::kLong);
  EXPECT_EQ(batch.at("input_ids")[0][1].item<int64_t>(), 1002);
  EXPECT_EQ(batch.at("input_ids")[1][1].item<int64_t>(), 1000);
  EXPECT_EQ(batch.at("input_mask").sum().item<int64_t>(), 6);
  EXPECT_EQ(batch.at("segment_ids").sizes(), (std::vector<int64_t>{2, 4}));
  ASSERT_EQ(batch.at("label_ids").sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(batch.at("label_ids")[0].item<int64_t>(), 0);
  EXPECT_THROW(collate(features, {3}, c10::Device(c10::kCPU)), Error);
}

// ---------------------------------------------------------------------------------------------
// Metrics, computed by hand

TEST(ClassifierMetrics, AccuracyAndF1) {
  // TP = 2 (0, 2), FN = 1 (1), FP = 1 (3): F1 = 2·2 / (2·2 + 1 + 1) = 2/3.
  const std::vector<int64_t> predictions{1, 0, 1, 1};
  const std::vector<int64_t> labels{1, 1, 1, 0};
  EXPECT_DOUBLE_EQ(accuracy(predictions, labels), 0.5);
  EXPECT_DOUBLE_EQ(f1_score(predictions, labels), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(f1_score({0, 0}, {0, 0}), 0.0);  // no positives anywhere
  EXPECT_DOUBLE_EQ(f1_score({1, 1}, {1, 1}), 1.0);
}

TEST(ClassifierMetrics, Matthews) {
  // TP = 2, FP = 1, TN = 2, FN = 1: (2·2 − 1·1) / sqrt(3·3·3·3) = 1/3.
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 1, 0, 0, 1, 0}, {1, 0, 0, 0, 1, 1}), 1.0 / 3.0);
  // TP = 2, FP = 1, TN = 0, FN = 1: (0 − 1) / sqrt(3·3·1·1) = −1/3.
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 0, 1, 1}, {1, 1, 1, 0}), -1.0 / 3.0);
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 0, 1}, {1, 0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 1, 1}, {1, 0, 1}), 0.0);  // undefined: no negatives
  EXPECT_THROW(matthews_corrcoef({1}, {1, 0}), Error);
}

TEST(ClassifierMetrics, Mean) {
  EXPECT_DOUBLE_EQ(mean({1.0, 2.0, 4.5}), 2.5);
  EXPECT_DOUBLE_EQ(mean({}), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Options

ConfigView task_view(std::map<std::string, OptionValue> values) {
  return ConfigView("task", classifier_option_decls(), std::move(values));
}

TEST(ClassifierOptions, DefaultsAndDocs) {
  for (const OptionDecl& decl : classifier_option_decls()) {
    EXPECT_FALSE(decl.doc.empty()) << decl.key;
  }
  const ClassifierOptions options = ClassifierOptions::from_config(
      task_view({{"task_name", std::string("cola")}, {"data_dir", std::string("/data/CoLA")}}));
  EXPECT_EQ(options.task_name, "cola");
  EXPECT_EQ(options.data_dir, "/data/CoLA");
  EXPECT_EQ(options.max_seq_length, 128);
  EXPECT_EQ(options.max_train_examples, 0);
  EXPECT_EQ(options.max_eval_examples, 0);
  EXPECT_EQ(options.eval_split, "dev");
}

TEST(ClassifierOptions, Rules) {
  const auto decls = classifier_option_decls();
  auto find = [&](const std::string& key) {
    return *std::find_if(decls.begin(), decls.end(),
                         [&](const OptionDecl& d) { return d.key == key; });
  };
  EXPECT_TRUE(find("task_name").required);
  EXPECT_TRUE(find("data_dir").required);
  EXPECT_TRUE(check_value(find("task_name"), std::string("squad")).has_value());
  EXPECT_FALSE(check_value(find("task_name"), std::string("xnli")).has_value());
  EXPECT_TRUE(check_value(find("max_seq_length"), int64_t{513}).has_value());
  EXPECT_TRUE(check_value(find("eval_split"), std::string("test")).has_value());
}

// ---------------------------------------------------------------------------------------------
// Model and task

BertConfig tiny_config() {
  BertConfig config;
  config.vocab_size = 30522;  // the bert-base-uncased vocabulary
  config.hidden_size = 8;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 2;
  config.intermediate_size = 16;
  config.max_position_embeddings = 64;
  config.type_vocab_size = 2;
  return config;
}

TEST(ClassifierModel, ParameterNames) {
  ClassifierModel model(tiny_config(), 3, false);
  bool weight = false;
  bool bias = false;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    if (name == "classifier.weight") {
      weight = true;
      EXPECT_EQ(item.value().sizes(), (std::vector<int64_t>{3, 8}));
      // Truncated normal with stddev 0.02: nothing beyond two standard deviations.
      EXPECT_LE(item.value().abs().max().item<double>(), 0.04 + 1e-7);
      EXPECT_GT(item.value().abs().max().item<double>(), 0.0);
    } else if (name == "classifier.bias") {
      bias = true;
      EXPECT_EQ(item.value().abs().sum().item<double>(), 0.0);
    } else {
      EXPECT_EQ(name.rfind("bert.", 0), 0u) << name;
    }
  }
  EXPECT_TRUE(weight);
  EXPECT_TRUE(bias);
  EXPECT_TRUE(model->named_parameters().contains("bert.embeddings.word_embeddings.weight"));
}

TEST(ClassifierModel, ForwardShapeAndLossByHand) {
  ClassifierModel model(tiny_config(), 3, false);
  model->eval();
  const at::Tensor ids =
      at::tensor(std::vector<int64_t>{101, 2023, 102, 0, 101, 2003, 2009, 102}, at::kLong)
          .view({2, 4});
  const at::Tensor mask =
      at::tensor(std::vector<int64_t>{1, 1, 1, 0, 1, 1, 1, 1}, at::kLong).view({2, 4});
  const at::Tensor segments = at::zeros({2, 4}, at::kLong);
  const at::Tensor labels = at::tensor(std::vector<int64_t>{2, 0}, at::kLong);
  const at::Tensor logits = model->forward(ids, segments, mask);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 3}));

  double expected = 0;
  for (int64_t i = 0; i < 2; ++i) {
    double sum_exp = 0;
    for (int64_t j = 0; j < 3; ++j) sum_exp += std::exp(logits[i][j].item<double>());
    const double log_prob = logits[i][labels[i].item<int64_t>()].item<double>() - std::log(sum_exp);
    expected += -log_prob / 2.0;
  }
  const at::Tensor loss = per_example_loss(logits, labels).mean();
  EXPECT_NEAR(loss.item<double>(), expected, 1e-6);
}

ClassifierTask make_mrpc_task(const std::string& eval_split) {
  ClassifierOptions options;
  options.task_name = "mrpc";
  options.data_dir = data_path("glue/MRPC");
  options.max_seq_length = 32;
  options.max_train_examples = 10;
  options.max_eval_examples = 6;
  options.eval_split = eval_split;
  return ClassifierTask(options);
}

/// Reads and featurizes the task's data with the uncased tokenizer.
void prepare(ClassifierTask& task, const BertConfig& config) {
  TaskContext ctx;
  ctx.bert_config = &config;
  ctx.tokenizer = &uncased_tokenizer();
  task.prepare(ctx);
}

TEST(ClassifierTask, PrepareTrainAndEvaluate) {
  const BertConfig config = tiny_config();
  ClassifierTask task = make_mrpc_task("dev");
  prepare(task, config);
  EXPECT_EQ(task.num_train_examples(), 10);
  EXPECT_EQ(task.eval_features().size(), 6u);

  auto model = task.create_model(config, false);
  const Batch batch = task.make_train_batch({0, 3, 5}, c10::Device(c10::kCPU));
  EXPECT_EQ(batch.at("input_ids").sizes(), (std::vector<int64_t>{3, 32}));
  EXPECT_EQ(batch.at("label_ids").sizes(), (std::vector<int64_t>{3}));
  model->train();
  const LossOutput out = task.compute_loss(*model, batch);
  EXPECT_EQ(out.num_examples, 3);
  EXPECT_EQ(out.loss.dim(), 0);
  EXPECT_TRUE(out.loss.requires_grad());
  out.loss.backward();
  const auto params = model->named_parameters();
  EXPECT_TRUE(params["classifier.weight"].grad().defined());

  EvalContext eval_ctx;
  eval_ctx.eval_batch_size = 4;  // 6 examples: batches of 4 and 2
  const Metrics metrics = task.evaluate(*model, eval_ctx);
  ASSERT_EQ(metrics.size(), 4u);
  EXPECT_EQ(metrics[0].first, "eval_accuracy");
  EXPECT_EQ(metrics[1].first, "eval_loss");
  EXPECT_EQ(metrics[2].first, "eval_f1");
  EXPECT_EQ(metrics[3].first, "eval_combined_score");
  EXPECT_TRUE(model->is_training());  // mode given back

  // eval_loss is the mean over all examples, not over batch means.
  model->eval();
  std::vector<int64_t> all(6);
  for (int64_t i = 0; i < 6; ++i) all[i] = i;
  const Batch eval_batch = collate(task.eval_features(), all, c10::Device(c10::kCPU));
  const double whole = task.compute_loss(*model, eval_batch).loss.item<double>();
  EXPECT_NEAR(metrics[1].second, whole, 1e-6);
}

TEST(ClassifierTask, SparseEmbeddingGradient) {
  const BertConfig config = tiny_config();
  ClassifierTask task = make_mrpc_task("dev");
  prepare(task, config);
  auto model = task.create_model(config, /*sparse_embeddings=*/true);
  task.compute_loss(*model, task.make_train_batch({1, 2}, c10::Device(c10::kCPU))).loss.backward();
  const at::Tensor grad =
      model->named_parameters()["bert.embeddings.word_embeddings.weight"].grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_TRUE(grad.is_sparse());
}

TEST(ClassifierTask, EvalSplitTrainUsesTrainingExamples) {
  const BertConfig config = tiny_config();
  ClassifierTask task = make_mrpc_task("train");
  prepare(task, config);
  ASSERT_EQ(task.eval_features().size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(task.eval_features()[i].input_ids, task.train_features()[i].input_ids);
  }
}

TEST(ClassifierTask, ColaReportsMcc) {
  const BertConfig config = tiny_config();
  ClassifierOptions options;
  options.task_name = "cola";
  options.data_dir = data_path("glue/CoLA");
  options.max_seq_length = 16;
  options.max_train_examples = 4;
  options.max_eval_examples = 4;
  ClassifierTask task(options);
  prepare(task, config);
  auto model = task.create_model(config, false);
  const Metrics metrics = task.evaluate(*model, EvalContext{});
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_EQ(metrics[2].first, "eval_matthews_correlation");
}

TEST(ClassifierTask, SequenceLongerThanPositionsIsConfigError) {
  BertConfig config = tiny_config();
  config.max_position_embeddings = 16;
  ClassifierTask task = make_mrpc_task("dev");  // max_seq_length 32
  EXPECT_THROW(prepare(task, config), ConfigError);
}

}  // namespace
}  // namespace bertlab::classifier
