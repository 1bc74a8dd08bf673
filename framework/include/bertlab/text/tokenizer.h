#pragma once
// Google BERT's tokenization.py: BasicTokenizer, WordpieceTokenizer, FullTokenizer.

#include <bertlab/text/byte_trie.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bertlab {

/// vocab.txt: one token per line, id = line number (0-based).
/// Lines are stripped of surrounding whitespace as Google's load_vocab does (Python's
/// str.strip()); when a token occurs twice, find() answers the later line, as Google's dict.
class Vocab {
 public:
  Vocab() = default;

  /// Throws DataError naming the file when it cannot be read, is empty or is not UTF-8.
  static Vocab load(const std::filesystem::path& path);
  /// A vocabulary of `tokens` in id order (no stripping).
  static Vocab from_tokens(std::vector<std::string> tokens);
  /// The id of `token`, or nullopt. Does not allocate.
  std::optional<int64_t> find(std::string_view token) const;
  /// The id of `token`; throws DataError when absent.
  int64_t id(std::string_view token) const;
  /// The token of `id`; throws DataError when `id` is outside [0, size()).
  const std::string& token(int64_t id) const;
  /// The token of `id` for an id this vocabulary gave out (find, WordPiece); unchecked.
  std::string_view token_view(int64_t id) const {
    const auto i = static_cast<size_t>(id);
    return std::string_view(pool_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  /// Number of lines (ids), duplicates included.
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  /// All tokens, indexed by id.
  const std::vector<std::string>& tokens() const { return tokens_; }
  /// Whether a token is on more than one line (Google's load_vocab keeps the last line's id).
  bool has_duplicates() const { return distinct_ != tokens_.size(); }
  /// Length in bytes of the longest token, which bounds WordPiece's longest-match search.
  size_t max_token_bytes() const { return max_token_bytes_; }
  /// Every token, for WordPiece's first piece of a word (a duplicate answers its last line).
  const ByteTrie& word_start_trie() const { return word_start_trie_; }
  /// The tokens that start with "##", without it, for the pieces after the first.
  const ByteTrie& continuation_trie() const { return continuation_trie_; }

 private:
  // One entry of the token -> id index.
  struct Slot {
    uint32_t hash = 0;  // low bits of the token's hash
    int32_t id = -1;    // -1: empty
  };

  void build_index();

  std::vector<std::string> tokens_;  // [id]
  // Open addressing with linear probing over a power-of-two table at most half full, and the
  // tokens once more, back to back in pool_: WordPiece probes the index several times per word,
  // mostly for absent strings, and a small flat table keeps each probe to few cache misses.
  std::vector<Slot> slots_;
  std::string pool_;               // all tokens concatenated
  std::vector<uint32_t> offsets_;  // [id] -> start of the token in pool_; [size()] = end
  size_t max_token_bytes_ = 0;
  size_t distinct_ = 0;  // distinct tokens
  ByteTrie word_start_trie_;
  ByteTrie continuation_trie_;
};

/// Byte offset of the first invalid UTF-8 sequence in `text`, or nullopt when valid.
/// Invalid means what Python's strict "utf-8" codec rejects: stray continuation bytes,
/// truncated or overlong sequences, surrogates, code points above U+10FFFF.
std::optional<size_t> find_invalid_utf8(std::string_view text);

/// Cleaning, whitespace and punctuation splitting, CJK splitting, optional lower-casing and
/// accent stripping. Input must be valid UTF-8 (DataError otherwise).
class BasicTokenizer {
 public:
  explicit BasicTokenizer(bool do_lower_case = true) : do_lower_case_(do_lower_case) {}
  /// The tokens of `text`, as Google's BasicTokenizer.tokenize.
  std::vector<std::string> tokenize(std::string_view text) const;
  /// Calls `visit` with each token in order; the views are valid only during the call.
  void for_each_token(std::string_view text,
                      const std::function<void(std::string_view token)>& visit) const;
  /// Whether tokens are lower-cased and stripped of accents.
  bool do_lower_case() const { return do_lower_case_; }

 private:
  bool do_lower_case_;
};

/// Greedy longest-match-first WordPiece over one whitespace-separated token at a time.
class WordpieceTokenizer {
 public:
  /// `vocab` must outlive the tokenizer.
  WordpieceTokenizer(const Vocab* vocab, std::string unk_token = "[UNK]",
                     size_t max_input_chars_per_word = 200)
      : vocab_(vocab),
        unk_token_(std::move(unk_token)),
        unk_id_(vocab->find(unk_token_).value_or(-1)),
        max_chars_(max_input_chars_per_word) {}
  /// Splits `text` on whitespace, then each word into pieces, as Google's
  /// WordpieceTokenizer.tokenize.
  std::vector<std::string> tokenize(std::string_view text) const;
  /// Calls `visit` with the pieces of one word (no whitespace inside) and their ids; a word
  /// longer than max_input_chars_per_word code points or without a full match gives the
  /// unknown token, whose id is -1 when the vocabulary lacks it.
  void for_each_piece(std::string_view word,
                      const std::function<void(std::string_view piece, int64_t id)>& visit) const;

 private:
  const Vocab* vocab_;
  std::string unk_token_;
  int64_t unk_id_;    // id of unk_token_, -1 when the vocabulary lacks it
  size_t max_chars_;  // in code points
};

/// BasicTokenizer then WordpieceTokenizer, as Google's FullTokenizer. Copies share the vocab.
class FullTokenizer {
 public:
  /// Throws DataError when the vocabulary file cannot be loaded.
  FullTokenizer(const std::filesystem::path& vocab_file, bool do_lower_case);
  /// Over an already loaded vocabulary.
  FullTokenizer(std::shared_ptr<const Vocab> vocab, bool do_lower_case);
  /// The word pieces of `text`.
  std::vector<std::string> tokenize(std::string_view text) const;
  /// The ids of tokenize(text), without building the strings; throws DataError when an
  /// unknown word meets a vocabulary without [UNK] (Google's convert_tokens_to_ids fails too).
  std::vector<int64_t> tokenize_to_ids(std::string_view text) const;
  /// Calls `visit` with each word piece and its id (-1 for an [UNK] the vocabulary lacks).
  void for_each_piece(std::string_view text,
                      const std::function<void(std::string_view piece, int64_t id)>& visit) const;
  /// Throws DataError for a token not in the vocabulary.
  std::vector<int64_t> convert_tokens_to_ids(const std::vector<std::string>& tokens) const;
  /// Throws DataError for an id outside the vocabulary.
  std::vector<std::string> convert_ids_to_tokens(const std::vector<int64_t>& ids) const;
  /// The vocabulary.
  const Vocab& vocab() const { return *vocab_; }
  /// Whether the basic tokenizer lower-cases and strips accents.
  bool do_lower_case() const { return basic_.do_lower_case(); }

 private:
  std::shared_ptr<const Vocab> vocab_;  // shared so that copies and moves keep wordpiece_ valid
  BasicTokenizer basic_;
  WordpieceTokenizer wordpiece_;
};

}  // namespace bertlab
