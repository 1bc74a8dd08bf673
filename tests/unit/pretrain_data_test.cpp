// Pretraining data: CPython's random.Random reproduced, Google's instances reproduced exactly
// (the golden file and the oracle's outputs) through the real executable, TFRecord framing and
// tf.train.Example encoding, and bad input.

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "create_data.h"
#include "py_random.h"
#include "test_util.h"
#include "tf_example.h"

namespace bertlab::pretrain {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;
using testing::write_file;

std::string vocab_file() { return data_path("vocab/bert-base-uncased/vocab.txt").string(); }

// Every expected value below is what Debian 12's python3 (CPython 3.11) prints for the same
// calls on random.Random(seed).
TEST(PyRandom, RandomAsCPython) {
  PyRandom r(12345);
  EXPECT_EQ(r.random(), 0.41661987254534116);
  EXPECT_EQ(r.random(), 0.010169169457068361);
  EXPECT_EQ(r.random(), 0.8252065092537432);
  EXPECT_EQ(PyRandom(0).random(), 0.8444218515250481);
  EXPECT_EQ(PyRandom((1ULL << 40) + 7).random(), 0.6137037779936511);  // a two-word seed
}

TEST(PyRandom, IntegersAndShuffleAsCPython) {
  PyRandom r(12345);
  std::vector<int64_t> ints;
  for (int i = 0; i < 5; ++i) ints.push_back(r.randint(0, 100));
  EXPECT_EQ(ints, (std::vector<int64_t>{53, 93, 1, 38, 47}));
  EXPECT_EQ(r.getrandbits(40), 214455382288U);
  EXPECT_EQ(r.randrange(3, 1000000), 283375);
  EXPECT_EQ(r.randint(0, 0), 0);  // still draws: getrandbits(1) until 0
  EXPECT_EQ(r.random(), 0.1616878239293682);

  PyRandom s(12345);
  std::vector<int> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  s.shuffle(x);
  EXPECT_EQ(x, (std::vector<int>{8, 7, 3, 5, 1, 2, 9, 4, 0, 6}));

  PyRandom b(1);
  EXPECT_EQ(b.getrandbits(1), 0U);
  EXPECT_EQ(b.getrandbits(7), 72U);
  EXPECT_EQ(b.getrandbits(32), 3639700191U);
  EXPECT_EQ(b.getrandbits(33), 7740669488U);
  EXPECT_EQ(b.getrandbits(64), 4705193143269049553U);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void expect_google_instances(const std::vector<std::string>& flags, const fs::path& expected) {
  TempDir dir;
  const fs::path out = dir / "out.jsonl";
  std::vector<std::string> args = {"pretrain",      "create-data",
                                   "--input_file",  data_path("pretrain/sample_text.txt").string(),
                                   "--vocab_file",  vocab_file(),
                                   "--output_file", out.string()};
  args.insert(args.end(), flags.begin(), flags.end());
  const auto result = run_bertlab(args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto got = lines_of(read_file(out));
  const auto want = lines_of(read_file(expected));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "instance " << i;
}

TEST(CreateData, TheSixtyGoldenInstancesOfGoogle) {
  // Decoded from the TFRecord Google's script wrote (tests/data/pretrain/README.md).
  expect_google_instances(
      {"--random_seed=12345", "--dupe_factor=5"},
      data_path("pretrain/sample_text-seed12345-len128-mp20-p0.15-dupe5.jsonl"));
}

TEST(CreateData, WholeWordMaskingAsGoogle) {
  expect_google_instances({"--do_whole_word_mask", "--random_seed", "7", "--dupe_factor", "3"},
                          data_path("pretrain/oracle/wwm-seed7-dupe3.jsonl"));
}

TEST(CreateData, ShortSequencesAndFewPredictionsAsGoogle) {
  expect_google_instances({"--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=2",
                           "--short_seq_prob=0.5"},
                          data_path("pretrain/oracle/len32-mp5-short0.5-dupe2.jsonl"));
}

TEST(CreateData, CasedHeavierMaskingAsGoogle) {
  expect_google_instances(
      {"--masked_lm_prob=0.3", "--random_seed=0", "--dupe_factor=2", "--nodo_lower_case"},
      data_path("pretrain/oracle/cased-p0.3-seed0-dupe2.jsonl"));
}

TEST(CreateData, TfRecordHoldsTheSameFeatures) {
  TempDir dir;
  const std::string common = "--input_file=" + data_path("pretrain/sample_text.txt").string();
  for (const char* name : {"a.jsonl", "b.tfrecord"}) {
    const auto result =
        run_bertlab({"pretrain", "create-data", common, "--vocab_file=" + vocab_file(),
                     "--dupe_factor=2", "--output_file=" + (dir / name).string()});
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  const auto lines = lines_of(read_file(dir / "a.jsonl"));
  const auto records = read_tfrecords(dir / "b.tfrecord");
  ASSERT_EQ(records.size(), lines.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const auto example = parse_example(records[i], "record");
    const auto expected = nlohmann::ordered_json::parse(lines[i]);
    ASSERT_EQ(example.size(), 7U);
    for (const auto& [name, values] : example) {
      SCOPED_TRACE(name);
      nlohmann::json got;
      if (const auto* ints = std::get_if<std::vector<int64_t>>(&values)) {
        got = *ints;
      } else {
        got = std::get<std::vector<float>>(values);
      }
      EXPECT_EQ(got, nlohmann::json(expected.at(name)));
    }
  }
}

TEST(TfRecord, ExampleBytesAsTheProtoDefinitionsSay) {
  // Example{features=1: Features{feature=1: entry{key=1: "a", value=2: Feature{int64_list=3:
  // Int64List{value=1 packed: [1]}}}}}: innermost 0a 01 01, Feature 1a 03 …, entry 0a 01 61 12 05
  // …, Features 0a 0a …, Example 0a 0c ….
  const std::string bytes = serialize_example({{"a", std::vector<int64_t>{1}}});
  EXPECT_EQ(bytes, std::string("\x0a\x0c\x0a\x0a\x0a\x01\x61\x12\x05\x1a\x03\x0a\x01\x01", 14));
  const auto back = parse_example(bytes, "x");
  ASSERT_EQ(back.size(), 1U);
  EXPECT_EQ(back[0].first, "a");
  EXPECT_EQ(std::get<std::vector<int64_t>>(back[0].second), std::vector<int64_t>{1});
}

TEST(TfRecord, CorruptionIsNamed) {
  TempDir dir;
  {
    TfRecordWriter writer(dir / "r.tfrecord");
    writer.write("hello");
    writer.write("world");
    writer.close();
  }
  EXPECT_EQ(read_tfrecords(dir / "r.tfrecord"), (std::vector<std::string>{"hello", "world"}));
  std::string bytes = read_file(dir / "r.tfrecord");
  bytes[12 + 5 + 4 + 12] ^= 1;  // first byte of the second record's data
  write_file(dir / "bad.tfrecord", bytes);
  try {
    read_tfrecords(dir / "bad.tfrecord");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("record 1 at byte 21: data checksum mismatch"),
              std::string::npos)
        << e.what();
  }
}

TEST(CreateData, OneSentenceDocumentsPairWithOtherDocuments) {
  TempDir dir;
  write_file(dir / "in.txt", "the man went to the store.\n\nhe bought a gallon of milk.\n");
  const FullTokenizer tokenizer(vocab_file(), true);
  auto docs = read_documents({dir / "in.txt"}, tokenizer);
  ASSERT_EQ(docs.size(), 2U);
  CreateDataOptions options;
  options.dupe_factor = 3;
  PyRandom rng(1);
  const auto instances = create_training_instances(docs, tokenizer, options, rng);
  ASSERT_EQ(instances.size(), 6U);  // one per document per pass
  for (const auto& instance : instances) EXPECT_TRUE(instance.is_random_next);
}

TEST(CreateData, BadInputIsNamed) {
  TempDir dir;
  const auto run = [&](const std::string& input, const std::string& vocab) {
    return run_bertlab({"pretrain", "create-data", "--input_file=" + input, "--vocab_file=" + vocab,
                        "--output_file=" + (dir / "out.jsonl").string()});
  };
  write_file(dir / "empty.txt", "\n\n  \n");
  const auto empty = run((dir / "empty.txt").string(), vocab_file());
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.err.find("no document with any token"), std::string::npos) << empty.err;
  EXPECT_FALSE(fs::exists(dir / "out.jsonl"));

  write_file(dir / "bad.txt", "fine line\nbroken \xff line\n");
  const auto utf8 = run((dir / "bad.txt").string(), vocab_file());
  EXPECT_EQ(utf8.exit_code, 1);
  EXPECT_NE(utf8.err.find("bad.txt:2: invalid UTF-8 at byte 17"), std::string::npos) << utf8.err;

  write_file(dir / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n");
  write_file(dir / "ok.txt", "the the\n");
  const auto no_mask = run((dir / "ok.txt").string(), (dir / "vocab.txt").string());
  EXPECT_EQ(no_mask.exit_code, 1);
  EXPECT_NE(no_mask.err.find("the vocabulary has no [MASK]"), std::string::npos) << no_mask.err;

  const auto missing = run((dir / "nothing*.txt").string(), vocab_file());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no file matches"), std::string::npos) << missing.err;

  const auto flag = run_bertlab({"pretrain", "create-data", "--dupe_factr=3"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("did you mean --dupe_factor?"), std::string::npos) << flag.err;

  const auto value = run_bertlab({"pretrain", "create-data", "--input_file=x", "--vocab_file=v",
                                  "--output_file=o", "--masked_lm_prob=1.5"});
  EXPECT_EQ(value.exit_code, 2);
  EXPECT_NE(value.err.find("--masked_lm_prob (1.5) must be in [0, 1]"), std::string::npos)
      << value.err;
}

}  // namespace
}  // namespace bertlab::pretrain
