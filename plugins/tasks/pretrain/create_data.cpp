// create_pretraining_data.py's reading, instance creation and masking.

#include "create_data.h"

#include <bertlab/error.h>
#include <bertlab/io/python_json.h>
#include <bertlab/text/python_text.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "py_random.h"

namespace bertlab::pretrain {

namespace fs = std::filesystem;

void CreateDataOptions::validate() const {
  const auto fail = [](const std::string& message) { throw ConfigError(message); };
  if (max_seq_length < 5) {
    fail(fmt::format("--max_seq_length ({}) must be >= 5: [CLS] A [SEP] B [SEP]", max_seq_length));
  }
  if (max_predictions_per_seq < 1) {
    fail(fmt::format("--max_predictions_per_seq ({}) must be >= 1", max_predictions_per_seq));
  }
  if (random_seed < 0) fail(fmt::format("--random_seed ({}) must be >= 0", random_seed));
  if (dupe_factor < 1) fail(fmt::format("--dupe_factor ({}) must be >= 1", dupe_factor));
  if (!(masked_lm_prob >= 0.0 && masked_lm_prob <= 1.0)) {
    fail(fmt::format("--masked_lm_prob ({}) must be in [0, 1]", masked_lm_prob));
  }
  if (!(short_seq_prob >= 0.0 && short_seq_prob <= 1.0)) {
    fail(fmt::format("--short_seq_prob ({}) must be in [0, 1]", short_seq_prob));
  }
}

namespace {

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw DataError(fmt::format("{}: cannot read the input file", path.string()));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Python's text-mode readline: lines end at "\n", "\r\n" or "\r" (universal newlines).
template <typename Visit>
void for_each_line(std::string_view text, Visit&& visit) {
  size_t start = 0;
  int64_t line_number = 1;
  while (start < text.size()) {
    size_t end = text.find_first_of("\r\n", start);
    if (end == std::string_view::npos) end = text.size();
    visit(text.substr(start, end - start), line_number++);
    if (end < text.size() && text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n') {
      ++end;
    }
    start = end + 1;
  }
}

// Python's str.strip(): Unicode whitespace off both ends.
std::string_view python_strip(std::string_view text) {
  const auto words = python_split(text);
  if (words.empty()) return {};
  const char* begin = words.front().data();
  const char* end = words.back().data() + words.back().size();
  return {begin, static_cast<size_t>(end - begin)};
}

}  // namespace

namespace {

/// The documents of lines [begin, end) of one file, as read_documents() builds them: the first
/// document continues the one before the range. On a token without an id, stops and keeps the
/// line (counted from the range's first) and the piece.
struct DocumentPart {
  std::vector<Document> documents = std::vector<Document>(1);
  int64_t bad_line = 0;  ///< 0: none
  std::string bad_piece;
};

void read_part(std::string_view text, const FullTokenizer& tokenizer, DocumentPart& part) {
  Sentence sentence;
  for_each_line(text, [&](std::string_view raw, int64_t line_number) {
    if (part.bad_line != 0) return;
    const std::string_view line = python_strip(raw);
    if (line.empty()) {
      part.documents.emplace_back();
      return;
    }
    sentence.clear();
    tokenizer.for_each_piece(line, [&](std::string_view piece, int64_t id) {
      if (id < 0 && part.bad_line == 0) {
        part.bad_line = line_number;
        part.bad_piece = std::string(piece);
      }
      sentence.push_back(static_cast<int32_t>(id));
    });
    if (part.bad_line == 0 && !sentence.empty()) part.documents.back().push_back(sentence);
  });
}

/// Line terminators in `text` as for_each_line() counts them ("\n", "\r\n", "\r").
int64_t count_lines(std::string_view text) {
  int64_t lines = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) {
      ++lines;
    }
  }
  return lines;
}

}  // namespace

std::vector<Document> read_documents(const std::vector<fs::path>& files,
                                     const FullTokenizer& tokenizer, int threads) {
  std::vector<Document> documents(1);
  const auto parts_wanted = static_cast<size_t>(std::max(1, threads));
  for (const auto& file : files) {
    const std::string text = read_bytes(file);
    if (const auto bad = find_invalid_utf8(text)) {
      const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(*bad), '\n');
      throw DataError(
          fmt::format("{}:{}: invalid UTF-8 at byte {}; the input must be UTF-8 text "
                      "(as create_pretraining_data.py reads it)",
                      file.string(), line, *bad));
    }
    // Ranges of whole lines: each cut is just after a "\n", which always ends a line.
    std::vector<size_t> cuts = {0};
    for (size_t k = 1; k < parts_wanted; ++k) {
      const size_t at = text.find('\n', std::max(cuts.back(), text.size() * k / parts_wanted));
      if (at == std::string::npos) break;
      cuts.push_back(at + 1);
    }
    cuts.push_back(text.size());
    const std::string_view all(text);
    std::vector<DocumentPart> parts(cuts.size() - 1);
    std::vector<std::thread> pool;
    for (size_t k = 1; k < parts.size(); ++k) {
      pool.emplace_back(
          [&, k] { read_part(all.substr(cuts[k], cuts[k + 1] - cuts[k]), tokenizer, parts[k]); });
    }
    read_part(all.substr(0, cuts[1]), tokenizer, parts[0]);
    for (auto& t : pool) t.join();
    for (size_t k = 0; k < parts.size(); ++k) {
      auto& part = parts[k];
      if (part.bad_line != 0) {
        const int64_t line = count_lines(all.substr(0, cuts[k])) + part.bad_line;
        throw DataError(fmt::format(
            "{}:{}: \"{}\" has no id: the vocabulary lacks [UNK]; use a BERT vocabulary",
            file.string(), line, part.bad_piece));
      }
      auto& continued = part.documents.front();
      documents.back().insert(documents.back().end(), std::make_move_iterator(continued.begin()),
                              std::make_move_iterator(continued.end()));
      documents.insert(documents.end(), std::make_move_iterator(part.documents.begin() + 1),
                       std::make_move_iterator(part.documents.end()));
    }
  }
  documents.erase(std::remove_if(documents.begin(), documents.end(),
                                 [](const Document& d) { return d.empty(); }),
                  documents.end());
  return documents;
}

namespace {

// What masking needs of the vocabulary.
struct MaskVocab {
  int32_t cls = 0;
  int32_t sep = 0;
  int32_t mask = 0;
  /// Google's vocab_words: the distinct tokens in file order (its OrderedDict's keys), each as
  /// the id convert_tokens_to_ids gives it (the token's last line).
  std::vector<int32_t> words;
  const Vocab* vocab = nullptr;
};

MaskVocab mask_vocab(const Vocab& vocab) {
  MaskVocab out;
  out.vocab = &vocab;
  const auto special = [&](const char* token) {
    const auto id = vocab.find(token);
    if (!id) {
      throw DataError(fmt::format(
          "the vocabulary has no {}; pretraining data needs [CLS], [SEP] and [MASK] (a BERT "
          "vocab.txt has them)",
          token));
    }
    return static_cast<int32_t>(*id);
  };
  out.cls = special("[CLS]");
  out.sep = special("[SEP]");
  out.mask = special("[MASK]");
  if (!vocab.has_duplicates()) {
    // Every line its own token: the words are the ids in order.
    out.words.resize(static_cast<size_t>(vocab.size()));
    for (size_t i = 0; i < out.words.size(); ++i) out.words[i] = static_cast<int32_t>(i);
    return out;
  }
  std::unordered_set<std::string_view> seen;
  for (const auto& token : vocab.tokens()) {
    if (seen.insert(token).second) out.words.push_back(static_cast<int32_t>(*vocab.find(token)));
  }
  return out;
}

// truncate_seq_pair: the longer side loses a token from its front or back until both fit.
void truncate_seq_pair(std::vector<int32_t>& a, std::vector<int32_t>& b, int64_t max_num_tokens,
                       PyRandom& rng) {
  while (static_cast<int64_t>(a.size() + b.size()) > max_num_tokens) {
    std::vector<int32_t>& trunc = a.size() > b.size() ? a : b;
    if (rng.random() < 0.5) {
      trunc.erase(trunc.begin());
    } else {
      trunc.pop_back();
    }
  }
}

// Buffers reused from instance to instance.
struct Scratch {
  std::vector<int32_t> original, positions, begin, order;
  std::vector<uint8_t> covered;
  std::vector<int32_t> tokens, tokens_a, tokens_b;
  std::vector<std::pair<int32_t, int32_t>> masked;  // (position, original id)
  std::vector<const Sentence*> chunk;
};

// create_masked_lm_predictions, in place on `tokens`; `masked` gets the (position, original id)
// pairs in ascending position.
void mask_tokens(std::vector<int32_t>& tokens, std::vector<std::pair<int32_t, int32_t>>& masked,
                 const CreateDataOptions& options, const MaskVocab& mv, PyRandom& rng,
                 Scratch& scratch) {
  // A candidate is a run of positions in `positions` (whole-word masking joins a word's ##
  // pieces), [begin[c], begin[c + 1]).
  auto& original = scratch.original;
  auto& positions = scratch.positions;
  auto& begin = scratch.begin;
  auto& order = scratch.order;
  auto& covered = scratch.covered;
  original.assign(tokens.begin(), tokens.end());
  positions.clear();
  begin.clear();
  for (size_t i = 0; i < original.size(); ++i) {
    const int32_t id = original[i];
    if (id == mv.cls || id == mv.sep) continue;
    if (!(options.do_whole_word_mask && !begin.empty() &&
          mv.vocab->token_view(id).substr(0, 2) == "##")) {
      begin.push_back(static_cast<int32_t>(positions.size()));
    }
    positions.push_back(static_cast<int32_t>(i));
  }
  const auto num_candidates = begin.size();
  begin.push_back(static_cast<int32_t>(positions.size()));
  // Shuffling the candidates' numbers draws exactly what shuffling the candidates does.
  order.resize(num_candidates);
  for (size_t c = 0; c < num_candidates; ++c) order[c] = static_cast<int32_t>(c);
  rng.shuffle(order);
  // Python's round() rounds halves to even, as nearbyint does in the default rounding mode.
  const auto rounded = static_cast<int64_t>(
      std::nearbyint(static_cast<double>(original.size()) * options.masked_lm_prob));
  const int64_t num_to_predict =
      std::min(options.max_predictions_per_seq, std::max<int64_t>(1, rounded));
  masked.clear();
  covered.assign(original.size(), 0);
  for (const int32_t c : order) {
    const int32_t* first = positions.data() + begin[static_cast<size_t>(c)];
    const int32_t* last = positions.data() + begin[static_cast<size_t>(c) + 1];
    if (static_cast<int64_t>(masked.size()) >= num_to_predict) break;
    if (static_cast<int64_t>(masked.size()) + (last - first) > num_to_predict) continue;
    if (std::any_of(first, last, [&](int32_t p) { return covered[p] != 0; })) continue;
    for (const int32_t* it = first; it != last; ++it) {
      const int32_t p = *it;
      covered[p] = 1;
      int32_t replacement = 0;
      if (rng.random() < 0.8) {
        replacement = mv.mask;
      } else if (rng.random() < 0.5) {
        replacement = original[p];
      } else {
        replacement = mv.words[static_cast<size_t>(
            rng.randint(0, static_cast<int64_t>(mv.words.size()) - 1))];
      }
      tokens[p] = replacement;
      masked.emplace_back(p, original[p]);
    }
  }
  // Positions are distinct (`covered`), so any sort orders them as Google's sorted() does.
  std::sort(masked.begin(), masked.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
}

// create_instances_from_document.
void instances_from_document(const std::vector<Document>& documents, size_t document_index,
                             const CreateDataOptions& options, const MaskVocab& mv, PyRandom& rng,
                             Scratch& scratch, InstanceStore& out) {
  const Document& document = documents[document_index];
  const int64_t max_num_tokens = options.max_seq_length - 3;
  int64_t target_seq_length = max_num_tokens;
  if (rng.random() < options.short_seq_prob) target_seq_length = rng.randint(2, max_num_tokens);

  std::vector<const Sentence*>& chunk = scratch.chunk;
  chunk.clear();
  int64_t chunk_length = 0;
  const auto n = static_cast<int64_t>(document.size());
  for (int64_t i = 0; i < n; ++i) {
    const Sentence& segment = document[static_cast<size_t>(i)];
    chunk.push_back(&segment);
    chunk_length += static_cast<int64_t>(segment.size());
    if (i != n - 1 && chunk_length < target_seq_length) continue;
    // The chunk is never empty here: it holds at least this segment.
    int64_t a_end = 1;
    if (chunk.size() >= 2) a_end = rng.randint(1, static_cast<int64_t>(chunk.size()) - 1);
    std::vector<int32_t>& tokens_a = scratch.tokens_a;
    tokens_a.clear();
    for (int64_t j = 0; j < a_end; ++j) {
      tokens_a.insert(tokens_a.end(), chunk[j]->begin(), chunk[j]->end());
    }
    std::vector<int32_t>& tokens_b = scratch.tokens_b;
    tokens_b.clear();
    bool is_random_next = false;
    if (chunk.size() == 1 || rng.random() < 0.5) {
      is_random_next = true;
      const int64_t target_b_length = target_seq_length - static_cast<int64_t>(tokens_a.size());
      // Ten tries at another document; the last draw stands even if it is this one.
      int64_t random_index = 0;
      for (int attempt = 0; attempt < 10; ++attempt) {
        random_index = rng.randint(0, static_cast<int64_t>(documents.size()) - 1);
        if (random_index != static_cast<int64_t>(document_index)) break;
      }
      const Document& random_document = documents[static_cast<size_t>(random_index)];
      const int64_t random_start = rng.randint(0, static_cast<int64_t>(random_document.size()) - 1);
      for (auto j = static_cast<size_t>(random_start); j < random_document.size(); ++j) {
        tokens_b.insert(tokens_b.end(), random_document[j].begin(), random_document[j].end());
        if (static_cast<int64_t>(tokens_b.size()) >= target_b_length) break;
      }
      // The segments of the chunk not used for A go back, for the next instance.
      i -= static_cast<int64_t>(chunk.size()) - a_end;
    } else {
      for (auto j = static_cast<size_t>(a_end); j < chunk.size(); ++j) {
        tokens_b.insert(tokens_b.end(), chunk[j]->begin(), chunk[j]->end());
      }
    }
    truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng);
    BERTLAB_CHECK(!tokens_a.empty() && !tokens_b.empty(),
                  "create-data: an instance with an empty segment (A {}, B {} tokens)",
                  tokens_a.size(), tokens_b.size());
    std::vector<int32_t>& tokens = scratch.tokens;
    std::vector<std::pair<int32_t, int32_t>>& masked = scratch.masked;
    tokens.clear();
    tokens.push_back(mv.cls);
    tokens.insert(tokens.end(), tokens_a.begin(), tokens_a.end());
    tokens.push_back(mv.sep);
    const size_t segment_a_length = tokens.size();
    tokens.insert(tokens.end(), tokens_b.begin(), tokens_b.end());
    tokens.push_back(mv.sep);
    masked.clear();
    mask_tokens(tokens, masked, options, mv, rng, scratch);
    out.add(tokens, segment_a_length, is_random_next, masked);
    chunk.clear();
    chunk_length = 0;
  }
}

// [CLS] body [SEP], masked, into `out` as one segment with next-sentence label 0.
void add_single_segment(const std::vector<int32_t>& body, const CreateDataOptions& options,
                        const MaskVocab& mv, PyRandom& rng, Scratch& scratch, InstanceStore& out) {
  std::vector<int32_t>& tokens = scratch.tokens;
  tokens.clear();
  tokens.push_back(mv.cls);
  tokens.insert(tokens.end(), body.begin(), body.end());
  tokens.push_back(mv.sep);
  scratch.masked.clear();
  mask_tokens(tokens, scratch.masked, options, mv, rng, scratch);
  out.add(tokens, /*segment_a_length=*/tokens.size(), /*is_random_next=*/false, scratch.masked);
}

// Masked LM only (next_sentence = false): the document's sentences packed in order into single
// segments, as RoBERTa's DOC-SENTENCES inputs (never across documents, so a file without blank
// lines is one document packed whole). Each instance draws its target length as Google draws a
// document's (short_seq_prob, randint(2, max)), then takes whole sentences while they fit; a
// sentence longer than the target on its own is cut at it and its rest starts the next
// instance, so every token of the document is in exactly one instance. Linear in the tokens.
void packed_instances_from_document(const Document& document, const CreateDataOptions& options,
                                    const MaskVocab& mv, PyRandom& rng, Scratch& scratch,
                                    InstanceStore& out) {
  const int64_t max_num_tokens = options.max_seq_length - 2;  // [CLS] and [SEP]
  std::vector<int32_t>& body = scratch.tokens_a;
  size_t s = 0;       // the next sentence of the document
  size_t offset = 0;  // its first token not yet in an instance
  while (s < document.size()) {
    int64_t target = max_num_tokens;
    if (rng.random() < options.short_seq_prob) target = rng.randint(2, max_num_tokens);
    body.clear();
    while (s < document.size()) {
      const Sentence& sentence = document[s];
      const size_t rest = sentence.size() - offset;
      const size_t room = static_cast<size_t>(target) - body.size();
      const auto from = sentence.begin() + static_cast<std::ptrdiff_t>(offset);
      if (rest <= room) {
        body.insert(body.end(), from, sentence.end());
        ++s;
        offset = 0;
        continue;
      }
      if (body.empty()) {  // too long alone: cut at the target
        body.insert(body.end(), from, from + static_cast<std::ptrdiff_t>(room));
        offset += room;
      }
      break;
    }
    add_single_segment(body, options, mv, rng, scratch, out);
  }
}

}  // namespace

void InstanceStore::add(const std::vector<int32_t>& tokens, size_t segment_a_length,
                        bool is_random_next,
                        const std::vector<std::pair<int32_t, int32_t>>& masked) {
  const size_t values = tokens.size() + 2 * masked.size();
  if (block_used_ + values > block_size_) {
    // A new block; an instance larger than a block gets one of its own.
    block_size_ = std::max(kBlockValues, values);
    blocks_.emplace_back(new int32_t[block_size_]);  // NOLINT(*-avoid-c-arrays)
    block_used_ = 0;
  }
  int32_t* data = blocks_.back().get() + block_used_;
  block_used_ += values;
  std::copy(tokens.begin(), tokens.end(), data);
  int32_t* positions = data + tokens.size();
  int32_t* labels = positions + masked.size();
  for (size_t k = 0; k < masked.size(); ++k) {
    positions[k] = masked[k].first;
    labels[k] = masked[k].second;
  }
  entries_.push_back({data, static_cast<uint32_t>(tokens.size()),
                      static_cast<uint32_t>(segment_a_length), static_cast<uint32_t>(masked.size()),
                      is_random_next});
}

InstanceView InstanceStore::operator[](size_t i) const {
  const Entry& e = entries_[i];
  InstanceView v;
  v.tokens = e.data;
  v.length = e.length;
  v.segment_a_length = e.segment_a_length;
  v.is_random_next = e.is_random_next;
  v.masked_positions = e.data + e.length;
  v.masked_labels = v.masked_positions + e.masked;
  v.masked = e.masked;
  return v;
}

size_t InstanceStore::bytes() const {
  return blocks_.size() * kBlockValues * sizeof(int32_t) + entries_.capacity() * sizeof(Entry) +
         order_.capacity() * sizeof(uint32_t);
}

InstanceStore create_instances(std::vector<Document> documents, const FullTokenizer& tokenizer,
                               const CreateDataOptions& options, PyRandom& rng) {
  options.validate();
  const MaskVocab mv = mask_vocab(tokenizer.vocab());
  rng.shuffle(documents);
  InstanceStore store;
  Scratch scratch;
  for (int64_t pass = 0; pass < options.dupe_factor; ++pass) {
    for (size_t d = 0; d < documents.size(); ++d) {
      if (options.next_sentence) {
        instances_from_document(documents, d, options, mv, rng, scratch, store);
      } else {
        packed_instances_from_document(documents[d], options, mv, rng, scratch, store);
      }
    }
  }
  BERTLAB_CHECK(store.size() <= std::numeric_limits<uint32_t>::max(),
                "create-data: {} instances; split the input into files of fewer than 2^32",
                store.size());
  // Shuffling the instances' numbers draws exactly what shuffling the instances does.
  std::vector<uint32_t> order(store.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  rng.shuffle(order);
  store.set_order(std::move(order));
  return store;
}

std::vector<TrainingInstance> create_training_instances(std::vector<Document> documents,
                                                        const FullTokenizer& tokenizer,
                                                        const CreateDataOptions& options,
                                                        PyRandom& rng) {
  const InstanceStore store = create_instances(std::move(documents), tokenizer, options, rng);
  std::vector<TrainingInstance> instances;
  instances.reserve(store.size());
  for (const uint32_t i : store.order()) {
    const InstanceView v = store[i];
    TrainingInstance instance;
    instance.tokens.assign(v.tokens, v.tokens + v.length);
    instance.segment_ids.assign(v.length, 1);
    std::fill_n(instance.segment_ids.begin(), v.segment_a_length, 0);
    instance.is_random_next = v.is_random_next;
    instance.masked_lm_positions.assign(v.masked_positions, v.masked_positions + v.masked);
    instance.masked_lm_labels.assign(v.masked_labels, v.masked_labels + v.masked);
    instances.push_back(std::move(instance));
  }
  return instances;
}

InstanceFeatures instance_features(const TrainingInstance& instance, int64_t max_seq_length,
                                   int64_t max_predictions_per_seq) {
  InstanceFeatures f;
  f.input_ids.assign(instance.tokens.begin(), instance.tokens.end());
  f.input_mask.assign(f.input_ids.size(), 1);
  f.segment_ids.assign(instance.segment_ids.begin(), instance.segment_ids.end());
  const auto seq = static_cast<size_t>(max_seq_length);
  BERTLAB_CHECK(f.input_ids.size() <= seq, "an instance of {} tokens exceeds max_seq_length {}",
                f.input_ids.size(), seq);
  f.input_ids.resize(seq, 0);
  f.input_mask.resize(seq, 0);
  f.segment_ids.resize(seq, 0);
  f.masked_lm_positions.assign(instance.masked_lm_positions.begin(),
                               instance.masked_lm_positions.end());
  f.masked_lm_ids.assign(instance.masked_lm_labels.begin(), instance.masked_lm_labels.end());
  f.masked_lm_weights.assign(f.masked_lm_ids.size(), 1.0F);
  const auto predictions = static_cast<size_t>(max_predictions_per_seq);
  f.masked_lm_positions.resize(predictions, 0);
  f.masked_lm_ids.resize(predictions, 0);
  f.masked_lm_weights.resize(predictions, 0.0F);
  f.next_sentence_labels = {instance.is_random_next ? 1 : 0};
  return f;
}

std::string features_to_json_line(const InstanceFeatures& f) {
  nlohmann::ordered_json j;
  j["input_ids"] = f.input_ids;
  j["input_mask"] = f.input_mask;
  j["segment_ids"] = f.segment_ids;
  j["masked_lm_positions"] = f.masked_lm_positions;
  j["masked_lm_ids"] = f.masked_lm_ids;
  nlohmann::ordered_json weights = nlohmann::ordered_json::array();
  for (const float w : f.masked_lm_weights) weights.push_back(static_cast<double>(w));
  j["masked_lm_weights"] = std::move(weights);
  j["next_sentence_labels"] = f.next_sentence_labels;
  return python_json_dumps(j);
}

namespace {

/// Appends `count` copies of `item` to a list already holding `before` items (", " between).
void append_repeated(std::string& out, std::string_view item, size_t count, size_t before) {
  for (size_t i = 0; i < count; ++i) {
    if (before + i > 0) out += ", ";
    out.append(item);
  }
}

}  // namespace

PaddedShape padded_shape(const InstanceView& v, int64_t max_seq_length,
                         int64_t max_predictions_per_seq) {
  PaddedShape shape;
  shape.seq = static_cast<size_t>(max_seq_length);
  shape.predictions = static_cast<size_t>(max_predictions_per_seq);
  BERTLAB_CHECK(v.length <= shape.seq, "an instance of {} tokens exceeds max_seq_length {}",
                v.length, shape.seq);
  shape.masked = std::min(v.masked, shape.predictions);
  return shape;
}

void append_instance_json_line(std::string& out, const InstanceView& v, int64_t max_seq_length,
                               int64_t max_predictions_per_seq) {
  const auto [seq, predictions, masked] = padded_shape(v, max_seq_length, max_predictions_per_seq);
  out += "{\"input_ids\": ";
  append_json_int_list(out, v.tokens, v.length, seq - v.length);
  out += ", \"input_mask\": [";
  append_repeated(out, "1", v.length, 0);
  append_repeated(out, "0", seq - v.length, v.length);
  out += "], \"segment_ids\": [";
  append_repeated(out, "0", v.segment_a_length, 0);
  append_repeated(out, "1", v.length - v.segment_a_length, v.segment_a_length);
  append_repeated(out, "0", seq - v.length, v.length);
  out += "], \"masked_lm_positions\": ";
  append_json_int_list(out, v.masked_positions, masked, predictions - masked);
  out += ", \"masked_lm_ids\": ";
  append_json_int_list(out, v.masked_labels, masked, predictions - masked);
  out += ", \"masked_lm_weights\": [";
  append_repeated(out, "1.0", masked, 0);
  append_repeated(out, "0.0", predictions - masked, masked);
  out += v.is_random_next ? "], \"next_sentence_labels\": [1]}\n"
                          : "], \"next_sentence_labels\": [0]}\n";
}

}  // namespace bertlab::pretrain
