// SQuAD examples to model inputs, as run_squad.py's convert_examples_to_features.

#include "squad_features.h"

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

#include <bertlab/io/python_json.h>

namespace bertlab::squad {

namespace {

// The word pieces of an example's document, as convert_examples_to_features's
// all_doc_tokens, tok_to_orig_index and orig_to_tok_index.
struct DocPieces {
  std::vector<std::string> pieces;     // [piece]
  std::vector<int32_t> ids;            // [piece]
  std::vector<int32_t> piece_to_word;  // [piece] -> [word]
  std::vector<int64_t> word_to_piece;  // [word] -> [piece] of its first piece
};

int32_t checked_id(int64_t id, std::string_view piece) {
  if (id < 0) {
    throw DataError(fmt::format(
        "squad: the vocabulary has no [UNK], so the unknown word \"{}\" has no id (Google's "
        "convert_tokens_to_ids fails too); use a vocabulary with [UNK]",
        piece));
  }
  return static_cast<int32_t>(id);
}

DocPieces tokenize_document(const std::vector<std::string>& words, const FullTokenizer& tokenizer) {
  DocPieces out;
  out.word_to_piece.reserve(words.size());
  for (size_t w = 0; w < words.size(); ++w) {
    out.word_to_piece.push_back(static_cast<int64_t>(out.pieces.size()));
    tokenizer.for_each_piece(words[w], [&](std::string_view piece, int64_t id) {
      out.pieces.emplace_back(piece);
      out.ids.push_back(checked_id(id, piece));
      out.piece_to_word.push_back(static_cast<int32_t>(w));
    });
  }
  return out;
}

// _improve_answer_span: the first (then longest) piece span inside [start, end] whose pieces
// are those of the answer text. Pieces hold no whitespace, so comparing the pieces one by one
// is comparing Google's space-joined strings.
std::pair<int64_t, int64_t> improve_answer_span(const std::vector<std::string>& pieces,
                                                int64_t start, int64_t end,
                                                const FullTokenizer& tokenizer,
                                                const std::string& answer_text) {
  const std::vector<std::string> answer = tokenizer.tokenize(answer_text);
  const auto n = static_cast<int64_t>(answer.size());
  if (n == 0) return {start, end};
  for (int64_t new_start = start; new_start + n - 1 <= end; ++new_start) {
    if (std::equal(answer.begin(), answer.end(), pieces.begin() + new_start)) {
      return {new_start, new_start + n - 1};
    }
  }
  return {start, end};
}

struct DocSpan {
  int64_t start = 0;   // [piece]
  int64_t length = 0;  // pieces
};

// The sliding windows over the document pieces.
std::vector<DocSpan> doc_spans(int64_t num_pieces, int64_t max_tokens_for_doc, int64_t doc_stride) {
  std::vector<DocSpan> spans;
  int64_t start = 0;
  while (start < num_pieces) {
    const int64_t length = std::min(num_pieces - start, max_tokens_for_doc);
    spans.push_back({start, length});
    if (start + length == num_pieces) break;
    start += std::min(length, doc_stride);
  }
  return spans;
}

// _check_is_max_context: whether span `current` gives piece `position` the most context
// (the larger of min(left, right) + 0.01 × span length; the first span wins ties).
bool is_max_context(const std::vector<DocSpan>& spans, size_t current, int64_t position) {
  double best_score = 0.0;
  size_t best = spans.size();
  for (size_t s = 0; s < spans.size(); ++s) {
    const int64_t end = spans[s].start + spans[s].length - 1;
    if (position < spans[s].start || position > end) continue;
    const int64_t left = position - spans[s].start;
    const int64_t right = end - position;
    const double score =
        static_cast<double>(std::min(left, right)) + 0.01 * static_cast<double>(spans[s].length);
    if (best == spans.size() || score > best_score) {
      best_score = score;
      best = s;
    }
  }
  return best == current;
}

}  // namespace

/// The document pieces of the last example converted, and the words they were made from.
struct FeatureMaker::Cache {
  DocPieces doc;
  const std::vector<std::string>* doc_words = nullptr;
};

FeatureMaker::FeatureMaker(const FullTokenizer& tokenizer, const FeatureOptions& options)
    : tokenizer_(tokenizer),
      options_(options),
      cls_id_(static_cast<int32_t>(tokenizer.vocab().id("[CLS]"))),
      sep_id_(static_cast<int32_t>(tokenizer.vocab().id("[SEP]"))),
      cache_(std::make_unique<Cache>()) {}

FeatureMaker::~FeatureMaker() = default;

std::vector<SquadFeature> convert_examples_to_features(const std::vector<SquadExample>& examples,
                                                       const FullTokenizer& tokenizer,
                                                       const FeatureOptions& options) {
  FeatureMaker maker(tokenizer, options);
  std::vector<SquadFeature> features;
  int64_t unique_id = kFirstUniqueId;
  for (size_t i = 0; i < examples.size(); ++i) {
    unique_id += static_cast<int64_t>(maker.add(examples, i, unique_id, features));
  }
  return features;
}

size_t FeatureMaker::add(const std::vector<SquadExample>& examples, size_t example_index,
                         int64_t unique_id, std::vector<SquadFeature>& features) {
  const FullTokenizer& tokenizer = tokenizer_;
  const FeatureOptions& options = options_;
  const int32_t cls_id = cls_id_;
  const int32_t sep_id = sep_id_;
  DocPieces& doc = cache_->doc;
  const std::vector<std::string>*& doc_words = cache_->doc_words;
  const size_t first = features.size();
  {
    const SquadExample& example = examples[example_index];
    std::vector<std::string> query;
    std::vector<int32_t> query_ids;
    tokenizer.for_each_piece(example.question_text, [&](std::string_view piece, int64_t id) {
      if (static_cast<int64_t>(query.size()) >= options.max_query_length) return;
      query.emplace_back(piece);
      query_ids.push_back(checked_id(id, piece));
    });
    // The questions of one paragraph share its words: tokenize them once.
    if (doc_words != example.doc_tokens.get()) {
      doc = tokenize_document(*example.doc_tokens, tokenizer);
      doc_words = example.doc_tokens.get();
    }
    const auto num_pieces = static_cast<int64_t>(doc.pieces.size());

    int64_t tok_start = -1;
    int64_t tok_end = -1;
    if (options.is_training && !example.is_impossible) {
      const auto words = static_cast<int64_t>(example.doc_tokens->size());
      tok_start = doc.word_to_piece[static_cast<size_t>(example.start_position)];
      tok_end = example.end_position < words - 1
                    ? doc.word_to_piece[static_cast<size_t>(example.end_position + 1)] - 1
                    : num_pieces - 1;
      std::tie(tok_start, tok_end) =
          improve_answer_span(doc.pieces, tok_start, tok_end, tokenizer, example.orig_answer_text);
    }

    // [CLS], [SEP] and [SEP] take three positions.
    const int64_t max_tokens_for_doc =
        options.max_seq_length - static_cast<int64_t>(query.size()) - 3;
    BERTLAB_CHECK_AS(DataError, max_tokens_for_doc > 0,
                     "squad: max_seq_length {} leaves no room for the document after a {}-token "
                     "question; raise max_seq_length above max_query_length + 3",
                     options.max_seq_length, query.size());
    const std::vector<DocSpan> spans =
        doc_spans(num_pieces, max_tokens_for_doc, options.doc_stride);
    const auto doc_offset = static_cast<int64_t>(query.size()) + 2;  // [CLS] query [SEP]

    for (size_t span_index = 0; span_index < spans.size(); ++span_index) {
      const DocSpan& span = spans[span_index];
      SquadFeature f;
      f.unique_id = unique_id++;
      f.example_index = static_cast<int64_t>(example_index);
      f.doc_span_index = static_cast<int64_t>(span_index);
      const auto total = static_cast<size_t>(doc_offset + span.length + 1);
      f.tokens.reserve(total);
      f.tokens.emplace_back("[CLS]");
      f.tokens.insert(f.tokens.end(), query.begin(), query.end());
      f.tokens.emplace_back("[SEP]");
      f.input_ids.reserve(static_cast<size_t>(options.max_seq_length));
      f.input_ids.push_back(cls_id);
      f.input_ids.insert(f.input_ids.end(), query_ids.begin(), query_ids.end());
      f.input_ids.push_back(sep_id);
      f.token_to_orig.assign(f.tokens.size(), -1);
      f.token_is_max_context.assign(f.tokens.size(), 0);
      f.segment_ids.assign(f.tokens.size(), 0);
      for (int64_t i = 0; i < span.length; ++i) {
        const auto piece = static_cast<size_t>(span.start + i);
        f.tokens.push_back(doc.pieces[piece]);
        f.input_ids.push_back(doc.ids[piece]);
        f.token_to_orig.push_back(doc.piece_to_word[piece]);
        f.token_is_max_context.push_back(is_max_context(spans, span_index, span.start + i) ? 1 : 0);
        f.segment_ids.push_back(1);
      }
      f.tokens.emplace_back("[SEP]");
      f.input_ids.push_back(sep_id);
      f.token_to_orig.push_back(-1);
      f.token_is_max_context.push_back(0);
      f.segment_ids.push_back(1);
      f.input_mask.assign(f.input_ids.size(), 1);
      const auto padded = static_cast<size_t>(options.max_seq_length);
      f.input_ids.resize(padded, 0);
      f.input_mask.resize(padded, 0);
      f.segment_ids.resize(padded, 0);

      if (options.is_training && !example.is_impossible) {
        // A window without the whole answer has nothing to point at: [CLS] (0, 0).
        const int64_t doc_end = span.start + span.length - 1;
        if (tok_start >= span.start && tok_end <= doc_end) {
          f.start_position = tok_start - span.start + doc_offset;
          f.end_position = tok_end - span.start + doc_offset;
        }
      }
      f.is_impossible = example.is_impossible;
      features.push_back(std::move(f));
    }
  }
  return features.size() - first;
}

std::string feature_to_json_line(const SquadFeature& feature, bool is_training) {
  nlohmann::ordered_json j;
  j["unique_id"] = feature.unique_id;
  j["example_index"] = feature.example_index;
  j["doc_span_index"] = feature.doc_span_index;
  j["tokens"] = feature.tokens;
  nlohmann::ordered_json to_orig = nlohmann::ordered_json::object();
  nlohmann::ordered_json max_context = nlohmann::ordered_json::object();
  for (size_t i = 0; i < feature.tokens.size(); ++i) {
    if (feature.token_to_orig[i] < 0) continue;
    to_orig[std::to_string(i)] = feature.token_to_orig[i];
    max_context[std::to_string(i)] = feature.token_is_max_context[i] != 0;
  }
  j["token_to_orig_map"] = std::move(to_orig);
  j["token_is_max_context"] = std::move(max_context);
  j["input_ids"] = feature.input_ids;
  j["input_mask"] = feature.input_mask;
  j["segment_ids"] = feature.segment_ids;
  if (is_training) {
    j["start_position"] = feature.start_position;
    j["end_position"] = feature.end_position;
  } else {
    j["start_position"] = nullptr;
    j["end_position"] = nullptr;
  }
  j["is_impossible"] = feature.is_impossible;
  return python_json_dumps(j);
}

void append_feature_json_line(std::string& out, const SquadFeature& feature, bool is_training) {
  out += "{\"unique_id\": ";
  append_json_int(out, feature.unique_id);
  out += ", \"example_index\": ";
  append_json_int(out, feature.example_index);
  out += ", \"doc_span_index\": ";
  append_json_int(out, feature.doc_span_index);
  out += ", \"tokens\": [";
  for (size_t i = 0; i < feature.tokens.size(); ++i) {
    if (i > 0) out += ", ";
    append_json_string(out, feature.tokens[i]);
  }
  // The two maps keyed by the document tokens' positions, as strings.
  const auto append_map = [&](const char* key, auto&& append_value) {
    out += key;
    bool first = true;
    for (size_t i = 0; i < feature.tokens.size(); ++i) {
      if (feature.token_to_orig[i] < 0) continue;
      out += first ? "{\"" : ", \"";
      first = false;
      append_json_int(out, static_cast<int64_t>(i));
      out += "\": ";
      append_value(i);
    }
    out += first ? "{}" : "}";
  };
  append_map("], \"token_to_orig_map\": ",
             [&](size_t i) { append_json_int(out, feature.token_to_orig[i]); });
  append_map(", \"token_is_max_context\": ",
             [&](size_t i) { out += feature.token_is_max_context[i] != 0 ? "true" : "false"; });
  out += ", \"input_ids\": ";
  append_json_int_list(out, feature.input_ids.data(), feature.input_ids.size());
  out += ", \"input_mask\": ";
  append_json_int_list(out, feature.input_mask.data(), feature.input_mask.size());
  out += ", \"segment_ids\": ";
  append_json_int_list(out, feature.segment_ids.data(), feature.segment_ids.size());
  if (is_training) {
    out += ", \"start_position\": ";
    append_json_int(out, feature.start_position);
    out += ", \"end_position\": ";
    append_json_int(out, feature.end_position);
  } else {
    out += ", \"start_position\": null, \"end_position\": null";
  }
  out += feature.is_impossible ? ", \"is_impossible\": true}\n" : ", \"is_impossible\": false}\n";
}

}  // namespace bertlab::squad
