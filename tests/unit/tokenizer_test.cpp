// Google BERT's tokenizer: reference token ids from llama.cpp's test set, outputs of Google's
// own tokenization.py on derived cases, and the `bertlab tokenize` command logic.

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "commands/tokenize_command.h"
#include "test_util.h"

namespace bertlab {
namespace {

using testing::data_path;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

std::filesystem::path uncased_vocab_path() {
  return data_path("vocab/bert-base-uncased/vocab.txt");
}

const FullTokenizer& uncased_tokenizer() {
  static const FullTokenizer tokenizer(uncased_vocab_path(), /*do_lower_case=*/true);
  return tokenizer;
}

const FullTokenizer& cased_tokenizer() {
  static const FullTokenizer tokenizer(uncased_vocab_path(), /*do_lower_case=*/false);
  return tokenizer;
}

// Splits on `separator`; a trailing separator does not open another item.
std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string::npos) end = text.size();
    items.push_back(text.substr(start, end - start));
    start = end + separator.size();
  }
  return items;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ' ';
    out += item;
  }
  return out;
}

std::string join(const std::vector<int64_t>& ids) {
  std::string out;
  for (const int64_t id : ids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  return out;
}

std::string run_command(const FullTokenizer& tokenizer, bool ids, const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out;
  EXPECT_EQ(run_tokenize_command(tokenizer, ids, in, out), 0);
  return out.str();
}

// ---------------------------------------------------------------------------------------------
// llama.cpp's reference strings for bert-base-uncased (see tests/data/tokenizer/README.md).

TEST(Tokenizer, MatchesLlamaCppReferenceIds) {
  // Each test string ends with "\n__ggml_vocab_test__\n"; each .out line holds its ids, each
  // preceded by a space.
  const auto inputs = split(read_file(data_path("tokenizer/ggml-vocab-bert-bge.gguf.inp")),
                            "\n__ggml_vocab_test__\n");
  const auto outputs = split(read_file(data_path("tokenizer/ggml-vocab-bert-bge.gguf.out")), "\n");
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(outputs.size(), inputs.size());
  const FullTokenizer& tokenizer = uncased_tokenizer();
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string expected;
    for (const auto& id : split(outputs[i], " ")) {
      if (id.empty()) continue;
      if (!expected.empty()) expected += ' ';
      expected += id;
    }
    EXPECT_EQ(join(tokenizer.tokenize_to_ids(inputs[i])), expected)
        << "test string " << i << ": '" << inputs[i] << "'";
    EXPECT_EQ(join(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(inputs[i]))), expected)
        << "test string " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Google's tokenization.py on derived cases (expected files made by oracle_tokenize.py).

struct GoogleCase {
  const char* input_file;
  const char* expected_file;
  bool lower;
  bool ids;
  size_t min_lines;  // guards against a truncated fixture
};

void PrintTo(const GoogleCase& c, std::ostream* os) { *os << c.expected_file; }

class GoogleCases : public ::testing::TestWithParam<GoogleCase> {};

// A stable test name: the expected file's name after its first dot, "uncased_tokens".
std::string case_name(const ::testing::TestParamInfo<GoogleCase>& info) {
  std::string name = info.param.expected_file;
  name = name.substr(name.find('.') + 1);
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

TEST_P(GoogleCases, MatchGoogleLineByLine) {
  const GoogleCase& c = GetParam();
  const FullTokenizer& tokenizer = c.lower ? uncased_tokenizer() : cased_tokenizer();
  const std::string input = read_file(data_path(std::string("tokenizer/") + c.input_file));
  const std::string expected = read_file(data_path(std::string("tokenizer/") + c.expected_file));
  const auto lines = split(input, "\n");
  const auto expected_lines = split(expected, "\n");
  ASSERT_GE(lines.size(), c.min_lines);
  // Empty lines are part of the set: split() keeps those between separators.
  ASSERT_EQ(std::count(input.begin(), input.end(), '\n'),
            std::count(expected.begin(), expected.end(), '\n'));
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string want = i < expected_lines.size() ? expected_lines[i] : "";
    const std::string got =
        c.ids ? join(tokenizer.tokenize_to_ids(lines[i])) : join(tokenizer.tokenize(lines[i]));
    EXPECT_EQ(got, want) << "line " << i + 1 << ": '" << lines[i] << "'";
  }
  EXPECT_EQ(run_command(tokenizer, c.ids, input), expected);
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizer, GoogleCases,
    ::testing::Values(GoogleCase{"google_cases.txt", "google_cases.uncased.tokens", true, false,
                                 60},
                      GoogleCase{"google_cases.txt", "google_cases.uncased.ids", true, true, 60},
                      GoogleCase{"google_cases.txt", "google_cases.cased.tokens", false, false, 60},
                      GoogleCase{"google_cases.txt", "google_cases.cased.ids", false, true, 60}),
    case_name);

// Differential test: 1,500 random lines (SQuAD text, vocabulary pieces glued together, unknown
// and over-long words, mixed scripts with controls, spaces and punctuation) that
// make_differential_cases.py ran through Google's tokenization.py.
INSTANTIATE_TEST_SUITE_P(
    Differential, GoogleCases,
    ::testing::Values(
        GoogleCase{"differential_cases.txt", "differential_cases.uncased.tokens", true, false,
                   1500},
        GoogleCase{"differential_cases.txt", "differential_cases.uncased.ids", true, true, 1500},
        GoogleCase{"differential_cases.txt", "differential_cases.cased.tokens", false, false, 1500},
        GoogleCase{"differential_cases.txt", "differential_cases.cased.ids", false, true, 1500}),
    case_name);

// ---------------------------------------------------------------------------------------------
// The classes one by one, with the examples of Google's tokenization_test.py.

TEST(BasicTokenizer, LowerCases) {
  const BasicTokenizer tokenizer(/*do_lower_case=*/true);
  EXPECT_EQ(tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  "),
            (std::vector<std::string>{"hello", "!", "how", "are", "you", "?"}));
  EXPECT_EQ(tokenizer.tokenize("H\u00E9llo"), (std::vector<std::string>{"hello"}));
}

TEST(BasicTokenizer, KeepsCaseAndAccents) {
  const BasicTokenizer tokenizer(/*do_lower_case=*/false);
  EXPECT_EQ(tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  "),
            (std::vector<std::string>{"HeLLo", "!", "how", "Are", "yoU", "?"}));
  EXPECT_EQ(tokenizer.tokenize("H\u00E9llo"), (std::vector<std::string>{"H\u00E9llo"}));
}

TEST(BasicTokenizer, SplitsCjkCharacters) {
  const BasicTokenizer tokenizer;
  EXPECT_EQ(tokenizer.tokenize("ah\u535A\u63A8zz"),
            (std::vector<std::string>{"ah", "\u535A", "\u63A8", "zz"}));
}

TEST(BasicTokenizer, FinalSigmaFollowsPythonLower) {
  const BasicTokenizer tokenizer;
  // str.lower() picks the final form at a word's end, even before a case-ignorable quote.
  EXPECT_EQ(tokenizer.tokenize("\u039F\u0394\u039F\u03A3 \u0391\u03A3'"),
            (std::vector<std::string>{"\u03BF\u03B4\u03BF\u03C2", "\u03B1\u03C2", "'"}));
  EXPECT_EQ(tokenizer.tokenize("\u03A3 \u03A3\u0391"),
            (std::vector<std::string>{"\u03C3", "\u03C3\u03B1"}));
}

TEST(BasicTokenizer, RejectsInvalidUtf8) {
  EXPECT_THROW(BasicTokenizer().tokenize("ab\xC3"), DataError);
}

Vocab small_vocab() {
  return Vocab::from_tokens(
      {"[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing"});
}

TEST(WordpieceTokenizer, GreedyLongestMatchFirst) {
  const Vocab vocab = small_vocab();
  const WordpieceTokenizer tokenizer(&vocab);
  EXPECT_TRUE(tokenizer.tokenize("").empty());
  EXPECT_EQ(tokenizer.tokenize("unwanted running"),
            (std::vector<std::string>{"un", "##want", "##ed", "runn", "##ing"}));
  // No match for the rest of a word makes the whole word unknown.
  EXPECT_EQ(tokenizer.tokenize("unwantedX running"),
            (std::vector<std::string>{"[UNK]", "runn", "##ing"}));
}

TEST(WordpieceTokenizer, LongWordsAreUnknown) {
  const Vocab vocab = Vocab::from_tokens({"[UNK]", "a", "##a", "\u00E9", "##\u00E9"});
  const WordpieceTokenizer tokenizer(&vocab, "[UNK]", 3);
  EXPECT_EQ(tokenizer.tokenize("aaa"), (std::vector<std::string>{"a", "##a", "##a"}));
  EXPECT_EQ(tokenizer.tokenize("aaaa"), (std::vector<std::string>{"[UNK]"}));
  // The limit counts code points, not bytes.
  EXPECT_EQ(tokenizer.tokenize("\u00E9\u00E9\u00E9").size(), 3u);
}

TEST(WordpieceTokenizer, UnknownTokenMissingFromVocabHasNoId) {
  const Vocab vocab = Vocab::from_tokens({"a"});
  const WordpieceTokenizer tokenizer(&vocab);
  std::vector<int64_t> ids;
  tokenizer.for_each_piece("b", [&](std::string_view piece, int64_t id) {
    EXPECT_EQ(piece, "[UNK]");
    ids.push_back(id);
  });
  EXPECT_EQ(ids, (std::vector<int64_t>{-1}));
}

TEST(WordpieceTokenizer, DuplicateTokenAnswersItsLastLine) {
  const Vocab vocab = Vocab::from_tokens({"[UNK]", "ab", "##c", "ab", "##c", "x"});
  const WordpieceTokenizer tokenizer(&vocab);
  std::vector<int64_t> ids;
  tokenizer.for_each_piece("abc", [&](std::string_view, int64_t id) { ids.push_back(id); });
  EXPECT_EQ(ids, (std::vector<int64_t>{3, 4}));
}

// The longest key that is a prefix of `text` and ends on a character, by trying every length.
ByteTrie::Match brute_force_longest_prefix(const Vocab& vocab, std::string_view text,
                                           bool continuation) {
  for (size_t length = text.size(); length > 0; --length) {
    if (length < text.size() && (static_cast<unsigned char>(text[length]) & 0xC0) == 0x80) {
      continue;
    }
    const std::string key = (continuation ? "##" : "") + std::string(text.substr(0, length));
    if (const auto id = vocab.find(key)) return ByteTrie::Match{length, static_cast<int32_t>(*id)};
  }
  return ByteTrie::Match{};
}

TEST(ByteTrie, LongestPrefixAgreesWithTheHashIndex) {
  const Vocab& vocab = uncased_tokenizer().vocab();
  // Candidates: every token, each with a suffix, its prefixes cut at any byte (so also inside
  // a character), and tokens glued to each other.
  std::vector<std::string> texts;
  const auto& tokens = vocab.tokens();
  for (size_t i = 0; i < tokens.size(); i += 7) {
    const std::string& t = tokens[i];
    texts.push_back(t);
    texts.push_back(t + "\u00E9zz");
    texts.push_back(t.substr(0, t.size() / 2));
    if (t.size() > 2 && t.compare(0, 2, "##") == 0) texts.push_back(t.substr(2) + "s");
    texts.push_back(t + tokens[(i * 31) % tokens.size()]);
  }
  size_t matched = 0;
  for (const auto& text : texts) {
    for (const bool continuation : {false, true}) {
      const ByteTrie& trie = continuation ? vocab.continuation_trie() : vocab.word_start_trie();
      const ByteTrie::Match got = trie.longest_prefix(text);
      const ByteTrie::Match want = brute_force_longest_prefix(vocab, text, continuation);
      EXPECT_EQ(got.length, want.length) << "'" << text << "' continuation " << continuation;
      EXPECT_EQ(got.id, want.id) << "'" << text << "' continuation " << continuation;
      matched += got.length > 0;
    }
  }
  EXPECT_GT(matched, texts.size());  // most texts match as a word start and many as "##"
}

TEST(ByteTrie, BuildsFromAnyBytes) {
  const std::string all_bytes = [] {
    std::string s;
    for (int b = 1; b < 256; ++b) s.push_back(static_cast<char>(b));
    return s;
  }();
  const std::vector<std::pair<std::string_view, int32_t>> keys = {
      {"", 9}, {"a", 0}, {"ab", 1}, {"a", 2}, {all_bytes, 3}, {std::string_view("\0x", 2), 4}};
  const ByteTrie trie = ByteTrie::build(keys);
  EXPECT_EQ(trie.find(""), -1);  // the empty key is never matched
  EXPECT_EQ(trie.find("a"), 2);  // the later of two equal keys
  EXPECT_EQ(trie.find("ab"), 1);
  EXPECT_EQ(trie.find("abc"), -1);
  EXPECT_EQ(trie.find(all_bytes), 3);
  EXPECT_EQ(trie.find(std::string_view("\0x", 2)), 4);
  EXPECT_EQ(trie.longest_prefix("abd").length, 2u);
  EXPECT_EQ(trie.longest_prefix("zz").length, 0u);
  // A key that ends inside a character of the text does not match there.
  const ByteTrie split = ByteTrie::build({{"\xC3", 0}, {"b", 1}});
  EXPECT_EQ(split.longest_prefix("\u00E9").length, 0u);
  EXPECT_EQ(split.longest_prefix("\xC3").id, 0);
}

TEST(FullTokenizer, TokenizesAndConverts) {
  const FullTokenizer& tokenizer = uncased_tokenizer();
  const auto tokens = tokenizer.tokenize("UNwant\u00E9d,running");
  EXPECT_EQ(tokens, (std::vector<std::string>{"unwanted", ",", "running"}));
  const auto ids = tokenizer.convert_tokens_to_ids(tokens);
  EXPECT_EQ(ids, tokenizer.tokenize_to_ids("UNwant\u00E9d,running"));
  EXPECT_EQ(tokenizer.convert_ids_to_tokens(ids), tokens);
  EXPECT_THROW(tokenizer.convert_tokens_to_ids({"not-a-token"}), DataError);
  EXPECT_THROW(tokenizer.convert_ids_to_tokens({tokenizer.vocab().size()}), DataError);
}

TEST(FullTokenizer, CopiesAndMovesKeepTheirVocab) {
  std::vector<FullTokenizer> tokenizers;
  {
    FullTokenizer original(uncased_vocab_path(), true);
    FullTokenizer copy = original;
    tokenizers.push_back(std::move(original));
    tokenizers.push_back(copy);
  }
  for (int i = 0; i < 20; ++i) tokenizers.push_back(tokenizers.back());  // reallocations
  for (const auto& tokenizer : tokenizers) {
    EXPECT_EQ(tokenizer.tokenize("unaffable"), (std::vector<std::string>{"una", "##ffa", "##ble"}));
  }
}

TEST(FullTokenizer, VisitorMayTokenizeAgain) {
  const FullTokenizer& tokenizer = uncased_tokenizer();
  std::vector<std::string> outer;
  tokenizer.for_each_piece("hello world", [&](std::string_view piece, int64_t) {
    EXPECT_EQ(tokenizer.tokenize("the end"), (std::vector<std::string>{"the", "end"}));
    outer.emplace_back(piece);
  });
  EXPECT_EQ(outer, (std::vector<std::string>{"hello", "world"}));
}

TEST(FullTokenizer, IdsNeedTheUnknownTokenInTheVocab) {
  const FullTokenizer tokenizer(std::make_shared<const Vocab>(Vocab::from_tokens({"a"})), true);
  EXPECT_EQ(tokenizer.tokenize("a b"), (std::vector<std::string>{"a", "[UNK]"}));
  EXPECT_THROW(tokenizer.tokenize_to_ids("a b"), DataError);
}

// ---------------------------------------------------------------------------------------------
// Vocab

TEST(Vocab, LoadsBertBaseUncased) {
  const Vocab vocab = Vocab::load(uncased_vocab_path());
  EXPECT_EQ(vocab.size(), 30522);
  EXPECT_EQ(vocab.id("[PAD]"), 0);
  EXPECT_EQ(vocab.id("[UNK]"), 100);
  EXPECT_EQ(vocab.id("[CLS]"), 101);
  EXPECT_EQ(vocab.token(102), "[SEP]");
  EXPECT_FALSE(vocab.find("not-a-token").has_value());
  EXPECT_THROW(vocab.id("not-a-token"), DataError);
  EXPECT_THROW(vocab.token(-1), DataError);
}

TEST(Vocab, StripsLinesAsPythonStrip) {
  TempDir dir;
  // str.strip() removes every str.isspace() character at both ends: here \r, space, tab,
  // U+00A0 and U+3000; inner spaces stay; a last line without '\n' counts.
  write_file(dir / "vocab.txt",
             "a\r\n b \t\n\u00A0c\u3000\nd e\n\n\x1f"
             "f\u0085\nlast");
  const Vocab vocab = Vocab::load(dir / "vocab.txt");
  EXPECT_EQ(vocab.tokens(), (std::vector<std::string>{"a", "b", "c", "d e", "", "f", "last"}));
}

TEST(Vocab, LaterDuplicateWins) {
  TempDir dir;
  write_file(dir / "vocab.txt", "x\ny\nx\n");
  const Vocab vocab = Vocab::load(dir / "vocab.txt");
  EXPECT_EQ(vocab.size(), 3);
  EXPECT_EQ(vocab.id("x"), 2);
  EXPECT_EQ(vocab.token(0), "x");
}

TEST(Vocab, CopiesOwnTheirIndex) {
  Vocab copy;
  {
    const Vocab original = small_vocab();
    copy = original;
  }
  const Vocab moved = std::move(copy);
  EXPECT_EQ(moved.id("##ing"), 9);
  EXPECT_EQ(moved.max_token_bytes(), 6u);
}

TEST(Vocab, ErrorsNameTheFile) {
  TempDir dir;
  const auto expect_error = [](const std::filesystem::path& path, const std::string& part) {
    try {
      Vocab::load(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(dir / "missing.txt", "cannot read");
  write_file(dir / "empty.txt", "");
  expect_error(dir / "empty.txt", "empty");
  write_file(dir / "latin1.txt", "ok\ncaf\xE9\n");
  expect_error(dir / "latin1.txt", ":2: byte offset 3: invalid UTF-8");
  expect_error(dir.path(), "directory");
}

// ---------------------------------------------------------------------------------------------
// find_invalid_utf8

TEST(FindInvalidUtf8, AcceptsValidText) {
  EXPECT_EQ(find_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("plain ASCII text longer than eight bytes"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("caf\u00E9 \u4E2D \U0001F600 \U0010FFFF \uFFFD"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8(std::string("nul\0inside", 10)), std::nullopt);
}

TEST(FindInvalidUtf8, ReportsTheFirstBadSequence) {
  EXPECT_EQ(find_invalid_utf8("\x80"), 0u);              // stray continuation
  EXPECT_EQ(find_invalid_utf8("abcdefghij\xC3"), 10u);   // truncated at the end
  EXPECT_EQ(find_invalid_utf8("ab\xC3(d"), 2u);          // bad continuation
  EXPECT_EQ(find_invalid_utf8("a\xC0\x80"), 1u);         // overlong NUL
  EXPECT_EQ(find_invalid_utf8("\xE0\x80\xAF"), 0u);      // overlong '/'
  EXPECT_EQ(find_invalid_utf8("ok \xED\xA0\x80"), 3u);   // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xF5\x80\x80\x80"), 0u);  // never a lead byte
  EXPECT_EQ(find_invalid_utf8("\u00E9\xFF\x80"), 2u);    // first of two
}

// ---------------------------------------------------------------------------------------------
// run_tokenize_command

TEST(TokenizeCommand, OneOutputLinePerInputLine) {
  const FullTokenizer& tokenizer = uncased_tokenizer();
  EXPECT_EQ(run_command(tokenizer, false, "Hello, World!\n\n  \nunaffable\r\n"),
            "hello , world !\n\n\nuna ##ffa ##ble\n");
  EXPECT_EQ(run_command(tokenizer, true, "Hello, World!\n\n"), "7592 1010 2088 999\n\n");
  EXPECT_EQ(run_command(tokenizer, false, ""), "");
}

TEST(TokenizeCommand, UnterminatedLastLineCounts) {
  EXPECT_EQ(run_command(uncased_tokenizer(), false, "a\nthe end"), "a\nthe end\n");
}

TEST(TokenizeCommand, LongInputAcrossReadChunks) {
  std::string input;
  std::string expected;
  for (int i = 0; i < 20000; ++i) {
    input += "Hello, World! " + std::string(i % 7, ' ') + "\n";
    expected += "hello , world !\n";
  }
  EXPECT_EQ(run_command(uncased_tokenizer(), false, input), expected);
}

TEST(TokenizeCommand, InvalidUtf8NamesLineAndOffset) {
  std::istringstream in("fine\nab\xE2\x28\xA1\n");
  std::ostringstream out;
  try {
    run_tokenize_command(uncased_tokenizer(), false, in, out);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "line 2, byte offset 2: invalid UTF-8");
  }
}

TEST(TokenizeCommand, IdsNeedTheUnknownTokenInTheVocab) {
  const FullTokenizer tokenizer(std::make_shared<const Vocab>(Vocab::from_tokens({"a"})), true);
  EXPECT_EQ(run_command(tokenizer, false, "a b\n"), "a [UNK]\n");
  std::istringstream in("a\na b\n");
  std::ostringstream out;
  EXPECT_THROW(run_tokenize_command(tokenizer, true, in, out), DataError);
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

TEST(Vocab, KnowsWhetherATokenIsOnTwoLines) {
  EXPECT_FALSE(Vocab::from_tokens({"[PAD]", "a", "b"}).has_duplicates());
  const Vocab twice = Vocab::from_tokens({"[PAD]", "a", "b", "a"});
  EXPECT_TRUE(twice.has_duplicates());
  EXPECT_EQ(twice.find("a"), 3);  // the later line wins, as Google's load_vocab
}

}  // namespace
}  // namespace bertlab
