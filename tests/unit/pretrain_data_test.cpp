// Pretraining data: CPython's random.Random reproduced, Google's instances reproduced exactly
// (the golden file and the oracle's outputs) through the real executable, TFRecord framing and
// tf.train.Example encoding, bad input, and the masked-LM-only instances (--next_sentence=false).

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
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

// ---------------------------------------------------------------------------------------------
// The direct writers and the threads, on a larger generated corpus

/// A corpus of `documents` documents of vocabulary words (whole words, ## pieces, accented and
/// CJK tokens, punctuation), drawn by a fixed LCG: sentences of 1 to 40 words, documents of 1 to
/// 12 sentences, with "\r\n" and "\r" line ends and blank lines holding spaces now and then.
std::string generated_corpus(size_t documents) {
  const Vocab vocab = Vocab::load(vocab_file());
  uint64_t state = 2024;
  const auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  std::string text;
  for (size_t d = 0; d < documents; ++d) {
    const size_t sentences = 1 + next(12);
    for (size_t s = 0; s < sentences; ++s) {
      const size_t words = 1 + next(40);
      for (size_t w = 0; w < words; ++w) {
        std::string_view token = vocab.tokens()[999 + next(vocab.tokens().size() - 999)];
        if (token.substr(0, 2) == "##" && !text.empty() && text.back() != ' ') {
          token.remove_prefix(2);  // glued to the word before: a word of several pieces
        } else if (w > 0) {
          text += ' ';
        }
        text += token;
      }
      const uint64_t end = next(20);
      text += end == 0 ? "\r\n" : end == 1 ? "\r" : "\n";
    }
    text += next(5) == 0 ? "  \n" : "\n";
  }
  return text;
}

struct Encoded {
  std::string tfrecord;
  std::string jsonl;
};

/// The instances of `corpus` as the direct writers encode them and as the general encoding
/// (InstanceFeatures, serialize_example, nlohmann's JSON) does.
std::pair<Encoded, Encoded> encode_both_ways(const fs::path& corpus,
                                             const CreateDataOptions& options, bool lower_case) {
  const FullTokenizer tokenizer(vocab_file(), lower_case);
  Encoded direct;
  Encoded general;
  {
    PyRandom rng(static_cast<uint64_t>(options.random_seed));
    const InstanceStore store =
        create_instances(read_documents({corpus}, tokenizer), tokenizer, options, rng);
    for (const uint32_t i : store.order()) {
      append_instance_record(direct.tfrecord, store[i], options.max_seq_length,
                             options.max_predictions_per_seq);
      append_instance_json_line(direct.jsonl, store[i], options.max_seq_length,
                                options.max_predictions_per_seq);
    }
  }
  PyRandom rng(static_cast<uint64_t>(options.random_seed));
  for (const auto& instance :
       create_training_instances(read_documents({corpus}, tokenizer), tokenizer, options, rng)) {
    const InstanceFeatures f =
        instance_features(instance, options.max_seq_length, options.max_predictions_per_seq);
    general.tfrecord += frame_tfrecord(serialize_example(to_example(f)));
    general.jsonl += features_to_json_line(f) + "\n";
  }
  return {direct, general};
}

TEST(CreateData, DirectWritersEqualTheGeneralEncoding) {
  TempDir dir;
  write_file(dir / "corpus.txt", generated_corpus(400));
  CreateDataOptions plain;
  plain.dupe_factor = 2;
  CreateDataOptions wwm;  // whole words, short sequences, predictions cut at the limit
  wwm.do_whole_word_mask = true;
  wwm.max_seq_length = 40;
  wwm.max_predictions_per_seq = 3;
  wwm.masked_lm_prob = 0.3;
  wwm.short_seq_prob = 0.5;
  wwm.random_seed = 9;
  for (const auto* options : {&plain, &wwm}) {
    const auto [direct, general] = encode_both_ways(dir / "corpus.txt", *options, true);
    EXPECT_GT(general.jsonl.size(), 1000000U) << "a corpus large enough to matter";
    EXPECT_TRUE(direct.tfrecord == general.tfrecord);
    EXPECT_TRUE(direct.jsonl == general.jsonl);
  }
}

TEST(CreateData, TheFilesAreTheSameOnAnyNumberOfThreads) {
  TempDir dir;
  write_file(dir / "corpus.txt", generated_corpus(300));
  const auto run = [&](const std::string& threads, const std::string& host_flag = "") {
    const fs::path out = dir / ("t" + threads + host_flag);
    fs::create_directories(out);
    std::vector<std::string> args = {
        "pretrain",
        "create-data",
        "--input_file=" + (dir / "corpus.txt").string(),
        "--vocab_file=" + vocab_file(),
        "--dupe_factor=2",
        "--threads=" + threads,
        "--output_file=" + (out / "a.jsonl").string() + "," + (out / "b.tfrecord").string()};
    if (!host_flag.empty()) args.push_back(host_flag);
    const auto result = run_bertlab(args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return std::make_pair(read_file(out / "a.jsonl"), read_file(out / "b.tfrecord"));
  };
  const auto one = run("1");
  const auto three = run("3");
  EXPECT_TRUE(one.first == three.first);
  EXPECT_TRUE(one.second == three.second);
  // A host flag sends the command to bertlab-host, which runs the pretrain plugin's tool.
  const auto host = run("2", "--allow-insecure-plugins");
  EXPECT_TRUE(host.first == one.first);
  EXPECT_TRUE(host.second == one.second);
  // And the files are the general encoding's, dealt round-robin.
  CreateDataOptions options;
  options.dupe_factor = 2;
  const auto general = encode_both_ways(dir / "corpus.txt", options, true).second;
  const auto lines = lines_of(general.jsonl);
  const auto records = read_tfrecords(dir / "t1" / "b.tfrecord");
  const auto got_lines = lines_of(one.first);
  ASSERT_EQ(got_lines.size() + records.size(), lines.size());
  std::string framed;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i % 2 == 0) {
      EXPECT_EQ(got_lines[i / 2], lines[i]) << "instance " << i;
    } else {
      framed += frame_tfrecord(records[i / 2]);
    }
  }
  EXPECT_TRUE(framed == one.second);
}

// `bertlab` runs the data commands without libtorch (bertlab-host has it for the rest).
TEST(CreateData, TheExecutableRunsWithoutLibtorch) {
  TempDir dir;
  const std::string command =
      std::string("ldd ") + BERTLAB_EXECUTABLE + " > " + (dir / "ldd.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_file(dir / "ldd.txt");
  const std::string libraries = read_file(dir / "ldd.txt");
  EXPECT_EQ(libraries.find("libtorch"), std::string::npos) << libraries;
  EXPECT_EQ(libraries.find("libc10"), std::string::npos) << libraries;
  EXPECT_NE(libraries.find("libc.so"), std::string::npos) << libraries;
}

TEST(CreateData, DocumentsAreTheSameOnAnyNumberOfThreads) {
  TempDir dir;
  // Blank lines of spaces, "\r\n" and lone "\r", a last line without its end.
  std::string text = generated_corpus(60) + "\r\n   \r\nlast words of the file";
  write_file(dir / "in.txt", text);
  const FullTokenizer tokenizer(vocab_file(), true);
  const auto one = read_documents({dir / "in.txt", dir / "in.txt"}, tokenizer, 1);
  EXPECT_GT(one.size(), 100U);
  for (const int threads : {2, 3, 7, 64}) {
    EXPECT_TRUE(read_documents({dir / "in.txt", dir / "in.txt"}, tokenizer, threads) == one)
        << threads << " threads";
  }
  // A word without an id (a vocabulary without [UNK]) is named by its line, whichever thread
  // read it: the first one in the file.
  write_file(dir / "vocab.txt", "[PAD]\n[CLS]\n[SEP]\n[MASK]\nthe\nman\n");
  const FullTokenizer no_unk(dir / "vocab.txt", true);
  std::string lines;
  for (int i = 1; i <= 200; ++i) lines += i == 150 || i == 180 ? "the dog\n" : "the man\n";
  write_file(dir / "unknown.txt", lines);
  for (const int threads : {1, 2, 5}) {
    try {
      read_documents({dir / "unknown.txt"}, no_unk, threads);
      ADD_FAILURE() << "no error with " << threads << " threads";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("unknown.txt:150: \"[UNK]\" has no id"),
                std::string::npos)
          << e.what();
    }
  }
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

// ---------------------------------------------------------------------------------------------
// Masked-LM-only instances (--next_sentence=false)

/// The 5,452 questions of TREC's train_5500.label without their "LABEL:fine " prefix: plain
/// text, one sentence a line and no blank line (one document); non-ASCII bytes dropped (line
/// 66 holds a raw 0xF0 byte, not UTF-8).
fs::path trec_questions(const TempDir& dir) {
  std::istringstream in(
      read_file(fs::path(BERTLAB_SOURCE_DIR) / "experiments/data/TREC/train_5500.label"));
  std::string text;
  for (std::string line; std::getline(in, line);) {
    for (const char c : line.substr(line.find(' ') + 1)) {
      if (static_cast<unsigned char>(c) < 0x80) text += c;
    }
    text += '\n';
  }
  write_file(dir / "trec.txt", text);
  return dir / "trec.txt";
}

/// The instance's tokens with the masked ones put back.
std::vector<int32_t> unmasked(const InstanceView& v) {
  std::vector<int32_t> tokens(v.tokens, v.tokens + v.length);
  for (size_t k = 0; k < v.masked; ++k) tokens[v.masked_positions[k]] = v.masked_labels[k];
  return tokens;
}

/// Checks one masked-LM-only instance; returns its text ([CLS] and [SEP] off, masks undone).
std::vector<int32_t> single_segment_text(const InstanceView& v, const CreateDataOptions& o,
                                         const Vocab& vocab) {
  const auto cls = static_cast<int32_t>(*vocab.find("[CLS]"));
  const auto sep = static_cast<int32_t>(*vocab.find("[SEP]"));
  EXPECT_LE(v.length, static_cast<size_t>(o.max_seq_length));
  EXPECT_EQ(v.segment_a_length, v.length);  // segment ids all 0
  EXPECT_FALSE(v.is_random_next);
  EXPECT_GE(v.masked, 1U);
  EXPECT_LE(v.masked, static_cast<size_t>(o.max_predictions_per_seq));
  for (size_t k = 0; k < v.masked; ++k) {
    EXPECT_GE(v.masked_positions[k], 1);
    EXPECT_LE(v.masked_positions[k], static_cast<int32_t>(v.length) - 2);
    if (k > 0) {
      EXPECT_LT(v.masked_positions[k - 1], v.masked_positions[k]);
    }
  }
  const std::vector<int32_t> tokens = unmasked(v);
  EXPECT_EQ(tokens.front(), cls);
  EXPECT_EQ(tokens.back(), sep);
  std::vector<int32_t> text(tokens.begin() + 1, tokens.end() - 1);
  EXPECT_GE(text.size(), 1U);
  EXPECT_EQ(std::count(text.begin(), text.end(), cls) + std::count(text.begin(), text.end(), sep),
            0);
  return text;
}

TEST(CreateData, MaskedLmOnlyPacksEverySentenceOnceInOrder) {
  TempDir dir;
  const FullTokenizer tokenizer(vocab_file(), true);
  const auto documents = read_documents({trec_questions(dir)}, tokenizer);
  ASSERT_EQ(documents.size(), 1U);  // no blank line: one document
  std::vector<int32_t> all;
  for (const auto& sentence : documents[0]) all.insert(all.end(), sentence.begin(), sentence.end());
  EXPECT_GT(all.size(), 50000U);
  CreateDataOptions options;
  options.next_sentence = false;
  options.dupe_factor = 2;
  for (const int64_t length : {int64_t{128}, int64_t{16}}) {  // 16: long questions are cut
    options.max_seq_length = length;
    options.short_seq_prob = length == 16 ? 0.5 : 0.1;
    PyRandom rng(3);
    const InstanceStore store = create_instances(documents, tokenizer, options, rng);
    // Every pass: the document's tokens, each once, in order (the store holds creation order).
    std::vector<int32_t> rebuilt;
    for (size_t i = 0; i < store.size(); ++i) {
      const auto text = single_segment_text(store[i], options, tokenizer.vocab());
      rebuilt.insert(rebuilt.end(), text.begin(), text.end());
    }
    std::vector<int32_t> twice = all;
    twice.insert(twice.end(), all.begin(), all.end());
    EXPECT_TRUE(rebuilt == twice) << "max_seq_length " << length;
    // About the tokens over max_seq_length instances a pass: packed full, the few short ones
    // (short_seq_prob) and the space a whole sentence leaves aside.
    const double full = 2.0 * static_cast<double>(all.size()) / static_cast<double>(length - 2);
    EXPECT_GE(static_cast<double>(store.size()), full) << length;
    EXPECT_LE(static_cast<double>(store.size()), (length == 16 ? 2.0 : 1.3) * full) << length;
  }
}

TEST(CreateData, MaskedLmOnlyInstancesStayInTheirDocument) {
  TempDir dir;
  std::string text;
  for (int d = 0; d < 6; ++d) {
    for (int s = 0; s < 1 + d * 3; ++s) text += d % 2 == 0 ? "the red house .\n" : "a blue sky\n";
    text += "\n";
  }
  write_file(dir / "in.txt", text);
  const FullTokenizer tokenizer(vocab_file(), true);
  const auto documents = read_documents({dir / "in.txt"}, tokenizer);
  ASSERT_EQ(documents.size(), 6U);
  CreateDataOptions options;
  options.next_sentence = false;
  options.max_seq_length = 20;
  PyRandom rng(5);
  const InstanceStore store = create_instances(documents, tokenizer, options, rng);
  const auto red = static_cast<int32_t>(*tokenizer.vocab().find("red"));
  const auto blue = static_cast<int32_t>(*tokenizer.vocab().find("blue"));
  size_t tokens = 0;
  for (size_t i = 0; i < store.size(); ++i) {
    const auto t = single_segment_text(store[i], options, tokenizer.vocab());
    tokens += t.size();
    const bool has_red = std::count(t.begin(), t.end(), red) > 0;
    const bool has_blue = std::count(t.begin(), t.end(), blue) > 0;
    EXPECT_NE(has_red, has_blue) << "instance " << i << " mixes two documents";
  }
  // 21 sentences of 4 tokens and 30 of 3, in each of 10 passes (dupe_factor).
  EXPECT_EQ(tokens, 10U * (4 * (1 + 7 + 13) + 3 * (4 + 10 + 16)));
}

TEST(CreateData, MaskedLmOnlyThroughTheExecutable) {
  TempDir dir;
  const auto result =
      run_bertlab({"pretrain", "create-data", "--input_file=" + trec_questions(dir).string(),
                   "--vocab_file=" + vocab_file(), "--output_file=" + (dir / "mlm.jsonl").string(),
                   "--next_sentence=false", "--do_whole_word_mask", "--max_seq_length=64",
                   "--max_predictions_per_seq=10", "--dupe_factor=2"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("1 documents → "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(" masked-LM-only instances in "), std::string::npos) << result.err;
  const auto instances = testing::read_jsonl(dir / "mlm.jsonl");
  EXPECT_GT(instances.size(), 2 * 900U);  // ≈ 2 × 62,000 tokens / 62 a full instance
  EXPECT_LT(instances.size(), 2 * 1300U);
  for (const auto& j : instances) {
    ASSERT_EQ(j["input_ids"].size(), 64U);
    const auto ids = j["input_ids"].get<std::vector<int64_t>>();
    const auto mask = j["input_mask"].get<std::vector<int64_t>>();
    const auto n = std::count(mask.begin(), mask.end(), 1);
    EXPECT_TRUE(std::all_of(mask.begin(), mask.begin() + n, [](int64_t m) { return m == 1; }));
    EXPECT_EQ(ids[0], 101);      // [CLS]
    EXPECT_EQ(ids[n - 1], 102);  // [SEP]
    const auto segments = j["segment_ids"].get<std::vector<int64_t>>();
    EXPECT_TRUE(std::all_of(segments.begin(), segments.end(), [](int64_t s) { return s == 0; }));
    const auto positions = j["masked_lm_positions"].get<std::vector<int64_t>>();
    const auto weights = j["masked_lm_weights"].get<std::vector<double>>();
    ASSERT_EQ(positions.size(), 10U);
    for (size_t k = 0; k < positions.size(); ++k) {
      if (weights[k] == 0.0) continue;
      EXPECT_GE(positions[k], 1);
      EXPECT_LE(positions[k], n - 2);
    }
    EXPECT_EQ(j["next_sentence_labels"], nlohmann::json::array({0}));
  }
}

}  // namespace
}  // namespace bertlab::pretrain
