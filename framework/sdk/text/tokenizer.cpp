#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

// Reproduces google-research/bert's tokenization.py (commit eedf571) as run by Python 3: the
// character classes, the order of the steps and Python's own string semantics that the script
// leans on (str.lower, str.split, str.strip) are each cited where they are implemented.

namespace bertlab {

namespace {

using CodePoint = utf8proc_int32_t;

constexpr CodePoint kReplacementChar = 0xFFFD;
constexpr CodePoint kLineSeparator = 0x2028;
constexpr CodePoint kParagraphSeparator = 0x2029;
constexpr CodePoint kCapitalSigma = 0x03A3;
constexpr CodePoint kSmallSigma = 0x03C3;
constexpr CodePoint kFinalSigma = 0x03C2;
constexpr CodePoint kCapitalIWithDot = 0x0130;

// ---------------------------------------------------------------------------------------------
// Character classes.

// How the basic tokenizer treats an ASCII byte; computed once so the common case is a lookup.
enum AsciiClass : uint8_t {
  kAsciiDrop,   // NUL and the other Cc characters: _clean_text removes them
  kAsciiSpace,  // ' ', \t, \n, \r: _is_whitespace (Google counts \t \n \r as whitespace)
  kAsciiPunct,  // _is_punctuation's ASCII ranges 33-47, 58-64, 91-96, 123-126
  kAsciiWord,   // letters and digits
};

constexpr std::array<uint8_t, 128> make_ascii_classes() {
  std::array<uint8_t, 128> classes{};
  for (int c = 0; c < 128; ++c) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      classes[c] = kAsciiSpace;
    } else if (c < 0x20 || c == 0x7F) {
      classes[c] = kAsciiDrop;
    } else if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
               (c >= 123 && c <= 126)) {
      classes[c] = kAsciiPunct;
    } else {
      classes[c] = kAsciiWord;
    }
  }
  return classes;
}

constexpr std::array<uint8_t, 128> kAsciiClasses = make_ascii_classes();

utf8proc_category_t category_of(CodePoint cp) {
  return static_cast<utf8proc_category_t>(utf8proc_get_property(cp)->category);
}

// _is_punctuation beyond ASCII: any Unicode P* category.
bool is_unicode_punctuation(utf8proc_category_t cat) {
  return cat == UTF8PROC_CATEGORY_PC || cat == UTF8PROC_CATEGORY_PD ||
         cat == UTF8PROC_CATEGORY_PS || cat == UTF8PROC_CATEGORY_PE ||
         cat == UTF8PROC_CATEGORY_PI || cat == UTF8PROC_CATEGORY_PF || cat == UTF8PROC_CATEGORY_PO;
}

// _is_chinese_char: Google's exact CJK ranges (not all of CJK: no Hangul, kana or Ext. G+).
bool is_cjk(CodePoint cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Python's str.isspace(), which str.split() and str.strip() use: \t-\r, \x1c-\x1f, space, and
// the characters of bidi class B/S/WS or category Zs.
bool is_python_space(CodePoint cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == kLineSeparator || cp == kParagraphSeparator || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// Unicode's Case_Ignorable (DerivedCoreProperties.txt), which Python's str.lower() consults for
// the final sigma: Mn, Me, Cf, Lm, Sk, and Word_Break MidLetter, MidNumLet or Single_Quote.
bool is_case_ignorable(CodePoint cp) {
  switch (category_of(cp)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  // Word_Break MidLetter, MidNumLet and Single_Quote (WordBreakProperty.txt).
  static constexpr CodePoint kWordBreakIgnorable[] = {
      0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2018, 0x2019,
      0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  return std::find(std::begin(kWordBreakIgnorable), std::end(kWordBreakIgnorable), cp) !=
         std::end(kWordBreakIgnorable);
}

// Unicode's Cased: Lu, Ll, Lt, anything with a case mapping, and the few Other_Lowercase /
// Other_Uppercase characters that have none and are not Case_Ignorable (those are never asked).
bool is_cased(CodePoint cp) {
  switch (category_of(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
      return true;
    default:
      break;
  }
  if (utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp) return true;
  return cp == 0x00AA || cp == 0x00BA || (cp >= 0x1F130 && cp <= 0x1F149) ||
         (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189);
}

// ---------------------------------------------------------------------------------------------
// UTF-8.

[[noreturn]] void throw_invalid_utf8(std::string_view text, const char* at) {
  throw DataError(
      fmt::format("invalid UTF-8 at byte offset {} of the text to tokenize", at - text.data()));
}

// Decodes the code point at `p`; returns its length in bytes, or throws for invalid UTF-8.
size_t decode(std::string_view text, const char* p, CodePoint* cp) {
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(p),
                                  text.data() + text.size() - p, cp);
  if (n <= 0) throw_invalid_utf8(text, p);
  return static_cast<size_t>(n);
}

void append_utf8(std::string& out, CodePoint cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
    return;
  }
  utf8proc_uint8_t bytes[4];
  const auto n = utf8proc_encode_char(cp, bytes);
  out.append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
}

// ---------------------------------------------------------------------------------------------
// Per-thread scratch buffers, so that tokenizing allocates only while they grow. A lease
// takes the next free set, so a visitor that tokenizes again gets a set of its own.

struct Scratch {
  std::string word;              // the current whitespace token, cleaned (UTF-8)
  std::vector<CodePoint> chars;  // word, decoded
  std::string lowered;           // word after str.lower()
  std::vector<CodePoint> decomposed = std::vector<CodePoint>(64);  // NFD of lowered
  std::string stripped;                                            // decomposed without Mn (UTF-8)
  std::vector<int64_t> pieces;  // ids matched so far in a WordPiece word
};

struct ScratchPool {
  std::vector<std::unique_ptr<Scratch>> sets;
  size_t in_use = 0;
};

class ScratchLease {
 public:
  ScratchLease() : pool_(pool()) {
    if (pool_.in_use == pool_.sets.size()) pool_.sets.push_back(std::make_unique<Scratch>());
    scratch_ = pool_.sets[pool_.in_use++].get();
  }
  ~ScratchLease() { --pool_.in_use; }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  Scratch& operator*() const { return *scratch_; }

 private:
  static ScratchPool& pool() {
    thread_local ScratchPool instance;
    return instance;
  }

  ScratchPool& pool_;
  Scratch* scratch_;
};

// ---------------------------------------------------------------------------------------------
// BasicTokenizer steps.

// Python's str.lower() needs the context of the whole token for one character: a capital sigma
// becomes final sigma when a cased letter precedes it and none follows, skipping
// Case_Ignorable characters both ways (Unicode's Final_Sigma condition).
bool is_final_sigma(const std::vector<CodePoint>& chars, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(chars[j - 1])) --j;
  if (j == 0 || !is_cased(chars[j - 1])) return false;
  size_t k = i + 1;
  while (k < chars.size() && is_case_ignorable(chars[k])) ++k;
  return k == chars.size() || !is_cased(chars[k]);
}

// token.lower() for a token with non-ASCII characters, into s.lowered.
void python_lower(std::string_view word, Scratch& s) {
  s.chars.clear();
  for (const char* p = word.data(); p < word.data() + word.size();) {
    CodePoint cp;
    p += decode(word, p, &cp);
    s.chars.push_back(cp);
  }
  s.lowered.clear();
  for (size_t i = 0; i < s.chars.size(); ++i) {
    const CodePoint cp = s.chars[i];
    CodePoint lower;
    if (cp == kCapitalSigma) {
      lower = is_final_sigma(s.chars, i) ? kFinalSigma : kSmallSigma;
    } else if (cp == kCapitalIWithDot) {
      // Python's full mapping gives "i" + U+0307 COMBINING DOT ABOVE; accent stripping, which
      // always follows lower-casing here, drops that Mn mark again, so plain "i" is the same.
      lower = 'i';
    } else {
      // All other full lower-case mappings are the simple one-code-point ones.
      lower = utf8proc_tolower(cp);
    }
    append_utf8(s.lowered, lower);
  }
}

// _run_strip_accents: NFD, then drop every Mn character; s.lowered into s.stripped.
void strip_accents(Scratch& s) {
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(s.lowered.data());
  const auto length = static_cast<utf8proc_ssize_t>(s.lowered.size());
  auto n = utf8proc_decompose(bytes, length, s.decomposed.data(),
                              static_cast<utf8proc_ssize_t>(s.decomposed.size()), options);
  if (n > static_cast<utf8proc_ssize_t>(s.decomposed.size())) {
    s.decomposed.resize(static_cast<size_t>(n));
    n = utf8proc_decompose(bytes, length, s.decomposed.data(), n, options);
  }
  if (n < 0) {
    throw DataError(fmt::format("cannot normalize '{}': {}", s.lowered, utf8proc_errmsg(n)));
  }
  s.stripped.clear();
  for (utf8proc_ssize_t i = 0; i < n; ++i) {
    const CodePoint cp = s.decomposed[static_cast<size_t>(i)];
    if (category_of(cp) != UTF8PROC_CATEGORY_MN) append_utf8(s.stripped, cp);
  }
}

// _run_split_on_punc: every punctuation character is a token of its own.
template <typename Visit>
void split_on_punctuation(std::string_view word, Visit&& visit) {
  size_t run = 0;  // byte offset where the current non-punctuation run starts
  size_t i = 0;
  while (i < word.size()) {
    const auto byte = static_cast<unsigned char>(word[i]);
    size_t length = 1;
    bool punctuation;
    if (byte < 0x80) {
      punctuation = kAsciiClasses[byte] == kAsciiPunct;
    } else {
      CodePoint cp;
      length = decode(word, word.data() + i, &cp);
      punctuation = is_unicode_punctuation(category_of(cp));
    }
    if (punctuation) {
      if (i > run) visit(word.substr(run, i - run));
      visit(word.substr(i, length));
      run = i + length;
    }
    i += length;
  }
  if (run < word.size()) visit(word.substr(run));
}

// One whitespace token of the cleaned text: lower-casing and accent stripping when asked, then
// the punctuation split. `word` is scratch and may be changed in place.
template <typename Visit>
void finish_word(std::string& word, bool ascii, bool do_lower_case, Scratch& s, Visit&& visit) {
  if (!do_lower_case) {
    split_on_punctuation(word, visit);
  } else if (ascii) {
    // ASCII has no accents to strip and no context-dependent lower-casing.
    for (char& c : word) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    split_on_punctuation(word, visit);
  } else {
    python_lower(word, s);
    strip_accents(s);
    split_on_punctuation(s.stripped, visit);
  }
}

template <typename Visit>
void split_on_python_space(std::string_view text, Visit&& visit) {
  size_t start = 0;
  size_t i = 0;
  while (i < text.size()) {
    CodePoint cp = static_cast<unsigned char>(text[i]);
    const size_t length = cp < 0x80 ? 1 : decode(text, text.data() + i, &cp);
    if (is_python_space(cp)) {
      if (i > start) visit(text.substr(start, i - start));
      start = i + length;
    }
    i += length;
  }
  if (start < text.size()) visit(text.substr(start));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Vocab

namespace {

// A 64-bit hash of a short byte string: eight bytes per multiply, then a murmur3 finalizer.
uint64_t hash_token(std::string_view token) {
  constexpr uint64_t kMultiplier = 0x9E3779B97F4A7C15ULL;
  uint64_t h = token.size() * kMultiplier;
  const char* p = token.data();
  size_t left = token.size();
  for (; left >= 8; p += 8, left -= 8) {
    uint64_t block;
    std::memcpy(&block, p, 8);
    h = (h ^ block) * kMultiplier;
    h ^= h >> 29;
  }
  if (left > 0) {
    uint64_t block = 0;
    std::memcpy(&block, p, left);
    h = (h ^ block) * kMultiplier;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

void Vocab::build_index() {
  if (tokens_.size() > static_cast<size_t>(INT32_MAX / 2)) {
    throw DataError(fmt::format("vocabulary of {} tokens is too large", tokens_.size()));
  }
  pool_.clear();
  offsets_.clear();
  offsets_.reserve(tokens_.size() + 1);
  max_token_bytes_ = 0;
  for (const auto& token : tokens_) {
    offsets_.push_back(static_cast<uint32_t>(pool_.size()));
    pool_ += token;
    max_token_bytes_ = std::max(max_token_bytes_, token.size());
  }
  offsets_.push_back(static_cast<uint32_t>(pool_.size()));

  size_t capacity = 16;
  while (capacity < 2 * tokens_.size()) capacity *= 2;
  slots_.assign(capacity, Slot{});
  const size_t mask = capacity - 1;
  distinct_ = 0;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& token = tokens_[i];
    const uint64_t hash = hash_token(token);
    size_t at = hash & mask;
    while (slots_[at].id >= 0 && !(slots_[at].hash == static_cast<uint32_t>(hash) &&
                                   tokens_[static_cast<size_t>(slots_[at].id)] == token)) {
      at = (at + 1) & mask;
    }
    // A duplicate takes over its earlier line's slot: Google's load_vocab lets the later win.
    if (slots_[at].id < 0) ++distinct_;
    slots_[at] = Slot{static_cast<uint32_t>(hash), static_cast<int32_t>(i)};
  }

  // The tries see the lines in order, so that a duplicate answers its last line there too.
  std::vector<std::pair<std::string_view, int32_t>> starts;
  std::vector<std::pair<std::string_view, int32_t>> continuations;
  starts.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string_view token = tokens_[i];
    starts.emplace_back(token, static_cast<int32_t>(i));
    if (token.size() > 2 && token.compare(0, 2, "##") == 0) {
      continuations.emplace_back(token.substr(2), static_cast<int32_t>(i));
    }
  }
  word_start_trie_ = ByteTrie::build(starts);
  continuation_trie_ = ByteTrie::build(continuations);
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens) {
  Vocab vocab;
  vocab.tokens_ = std::move(tokens);
  vocab.build_index();
  return vocab;
}

namespace {

// Python's str.strip() without arguments, as load_vocab applies it to each line: every
// str.isspace() character at either end, not only "\r\n".
std::string_view python_strip(std::string_view line) {
  while (!line.empty()) {
    CodePoint cp;
    const size_t length = decode(line, line.data(), &cp);
    if (!is_python_space(cp)) break;
    line.remove_prefix(length);
  }
  while (!line.empty()) {
    size_t start = line.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(line[start]) & 0xC0) == 0x80) --start;
    CodePoint cp;
    decode(line, line.data() + start, &cp);
    if (!is_python_space(cp)) break;
    line.remove_suffix(line.size() - start);
  }
  return line;
}

}  // namespace

Vocab Vocab::load(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw DataError(
        fmt::format("vocabulary file {} is a directory; vocab_file must name "
                    "vocab.txt itself",
                    path.string()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw DataError(fmt::format("cannot read vocabulary file {}: {}; check vocab_file",
                                path.string(), std::strerror(errno)));
  }
  std::ostringstream content_stream;
  content_stream << in.rdbuf();
  if (in.bad()) {
    throw DataError(fmt::format("cannot read vocabulary file {}: read error", path.string()));
  }
  const std::string content = content_stream.str();

  // Lines end at '\n' only, as tf.gfile's readline (the "r" mode of TensorFlow's GFile does not
  // translate a lone '\r'); a last line without '\n' still counts, as readline returns it.
  std::vector<std::string> tokens;
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    const std::string_view line(content.data() + start, end - start);
    if (const auto bad = find_invalid_utf8(line)) {
      throw DataError(
          fmt::format("{}:{}: byte offset {}: invalid UTF-8; the vocabulary must be "
                      "UTF-8 text",
                      path.string(), tokens.size() + 1, *bad));
    }
    tokens.emplace_back(python_strip(line));
    start = end + 1;
  }
  if (tokens.empty()) {
    throw DataError(
        fmt::format("vocabulary file {} is empty; expected one token per line", path.string()));
  }
  return from_tokens(std::move(tokens));
}

std::optional<int64_t> Vocab::find(std::string_view token) const {
  if (slots_.empty()) return std::nullopt;
  const uint64_t hash = hash_token(token);
  const size_t mask = slots_.size() - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    const Slot slot = slots_[at];
    if (slot.id < 0) return std::nullopt;
    if (slot.hash != static_cast<uint32_t>(hash)) continue;
    const auto id = static_cast<size_t>(slot.id);
    const size_t begin = offsets_[id];
    if (offsets_[id + 1] - begin == token.size() &&
        std::memcmp(pool_.data() + begin, token.data(), token.size()) == 0) {
      return slot.id;
    }
  }
}

int64_t Vocab::id(std::string_view token) const {
  const auto found = find(token);
  if (!found) {
    throw DataError(
        fmt::format("token '{}' is not in the vocabulary ({} tokens)", token, tokens_.size()));
  }
  return *found;
}

const std::string& Vocab::token(int64_t id) const {
  if (id < 0 || id >= size()) {
    throw DataError(
        fmt::format("token id {} is outside the vocabulary (ids 0 to {})", id, size() - 1));
  }
  return tokens_[static_cast<size_t>(id)];
}

// ---------------------------------------------------------------------------------------------
// UTF-8 validation

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  const char* p = begin;
  while (p < end) {
    // Skip ASCII eight bytes at a time.
    if (end - p >= 8) {
      uint64_t block;
      std::memcpy(&block, p, sizeof(block));
      if ((block & 0x8080808080808080ULL) == 0) {
        p += 8;
        continue;
      }
    }
    if (static_cast<unsigned char>(*p) < 0x80) {
      ++p;
      continue;
    }
    // utf8proc_iterate applies Unicode's well-formed table (no overlongs, surrogates or code
    // points past U+10FFFF), as Python's strict codec, and fails at the sequence's first byte.
    CodePoint cp;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(p), end - p, &cp);
    if (n <= 0) return static_cast<size_t>(p - begin);
    p += n;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// BasicTokenizer

void BasicTokenizer::for_each_token(
    std::string_view text, const std::function<void(std::string_view token)>& visit) const {
  ScratchLease lease;
  Scratch& s = *lease;
  std::string& word = s.word;
  word.clear();
  bool ascii = true;  // whether `word` is all ASCII
  const auto flush = [&] {
    if (word.empty()) return;
    finish_word(word, ascii, do_lower_case_, s, visit);
    word.clear();
    ascii = true;
  };

  // One pass does _clean_text, _tokenize_chinese_chars and whitespace_tokenize: a dropped
  // character joins its neighbours, a whitespace character ends the word, a CJK character is a
  // word of its own.
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    const auto byte = static_cast<unsigned char>(*p);
    if (byte < 0x80) {
      switch (kAsciiClasses[byte]) {
        case kAsciiDrop:
          break;
        case kAsciiSpace:
          flush();
          break;
        default:
          word.push_back(static_cast<char>(byte));
      }
      ++p;
      continue;
    }
    CodePoint cp;
    const size_t length = decode(text, p, &cp);
    const auto cat = category_of(cp);
    if (cp == kReplacementChar || cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF) {
      // _clean_text drops U+FFFD and _is_control's Cc/Cf (its \t \n \r exception is ASCII).
    } else if (cat == UTF8PROC_CATEGORY_ZS || cp == kLineSeparator || cp == kParagraphSeparator) {
      // Zs is _is_whitespace; U+2028/U+2029 survive _clean_text but str.split() splits on them.
      flush();
    } else if (is_cjk(cp)) {
      flush();
      word.append(p, length);
      ascii = false;
      flush();
    } else {
      word.append(p, length);
      ascii = false;
    }
    p += length;
  }
  flush();
  // Google re-splits " ".join(tokens) on whitespace; no token can hold any here, since
  // str.lower() and NFD never produce a str.isspace() character.
}

std::vector<std::string> BasicTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> tokens;
  for_each_token(text, [&](std::string_view token) { tokens.emplace_back(token); });
  return tokens;
}

// ---------------------------------------------------------------------------------------------
// WordpieceTokenizer

void WordpieceTokenizer::for_each_piece(
    std::string_view word,
    const std::function<void(std::string_view piece, int64_t id)>& visit) const {
  // Google counts characters; a word of no more bytes than the limit cannot exceed it.
  if (word.size() > max_chars_) {
    const auto chars = static_cast<size_t>(std::count_if(word.begin(), word.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
    if (chars > max_chars_) {
      visit(unk_token_, unk_id_);
      return;
    }
  }
  ScratchLease lease;
  std::vector<int64_t>& pieces = (*lease).pieces;
  pieces.clear();
  // Google tries the candidates from the longest down and keeps the first in the vocabulary:
  // the longest vocabulary token that is a prefix of the rest of the word and ends on a
  // character, which one walk of the trie finds. Pieces after the first carry "##", so they
  // are looked up without it among the tokens that have it.
  const ByteTrie* trie = &vocab_->word_start_trie();
  size_t begin = 0;  // bytes of `word` matched so far
  while (begin < word.size()) {
    const ByteTrie::Match match = trie->longest_prefix(word.substr(begin));
    if (match.length == 0) {
      // Google gives up on the whole word, dropping the pieces matched so far.
      visit(unk_token_, unk_id_);
      return;
    }
    pieces.push_back(match.id);
    begin += match.length;
    trie = &vocab_->continuation_trie();
  }
  for (const int64_t id : pieces) visit(vocab_->token_view(id), id);
}

std::vector<std::string> WordpieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> pieces;
  const std::function<void(std::string_view, int64_t)> add = [&](std::string_view piece, int64_t) {
    pieces.emplace_back(piece);
  };
  // Google's whitespace_tokenize: str.split().
  split_on_python_space(text, [&](std::string_view word) { for_each_piece(word, add); });
  return pieces;
}

// ---------------------------------------------------------------------------------------------
// FullTokenizer

FullTokenizer::FullTokenizer(const std::filesystem::path& vocab_file, bool do_lower_case)
    : FullTokenizer(std::make_shared<const Vocab>(Vocab::load(vocab_file)), do_lower_case) {}

FullTokenizer::FullTokenizer(std::shared_ptr<const Vocab> vocab, bool do_lower_case)
    : vocab_(std::move(vocab)), basic_(do_lower_case), wordpiece_(vocab_.get()) {}

void FullTokenizer::for_each_piece(
    std::string_view text,
    const std::function<void(std::string_view piece, int64_t id)>& visit) const {
  basic_.for_each_token(text,
                        [&](std::string_view token) { wordpiece_.for_each_piece(token, visit); });
}

std::vector<std::string> FullTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> pieces;
  for_each_piece(text, [&](std::string_view piece, int64_t) { pieces.emplace_back(piece); });
  return pieces;
}

std::vector<int64_t> FullTokenizer::tokenize_to_ids(std::string_view text) const {
  std::vector<int64_t> ids;
  for_each_piece(text, [&](std::string_view piece, int64_t id) {
    if (id < 0) {
      throw DataError(
          fmt::format("an unknown word became '{}', which is not in the vocabulary; "
                      "add it to vocab.txt",
                      piece));
    }
    ids.push_back(id);
  });
  return ids;
}

std::vector<int64_t> FullTokenizer::convert_tokens_to_ids(
    const std::vector<std::string>& tokens) const {
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const auto& token : tokens) ids.push_back(vocab_->id(token));
  return ids;
}

std::vector<std::string> FullTokenizer::convert_ids_to_tokens(
    const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int64_t id : ids) tokens.push_back(vocab_->token(id));
  return tokens;
}

}  // namespace bertlab
