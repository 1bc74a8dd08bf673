#pragma once
// run_classifier.py's convert_single_example: WordPiece tokens, pair truncation, the
// [CLS] a [SEP] b [SEP] layout, segment ids, mask and zero padding.

#include <cstdint>
#include <string>
#include <vector>

#include "processors.h"

namespace bertlab {
class FullTokenizer;
}

namespace bertlab::classifier {

/// The model inputs of one example, each of length max_seq_length.
struct InputFeatures {
  std::vector<int64_t> input_ids;    ///< [seq] vocabulary ids, 0 after the last token
  std::vector<int64_t> input_mask;   ///< [seq] 1 for real tokens, 0 for padding
  std::vector<int64_t> segment_ids;  ///< [seq] 0 for [CLS] a [SEP], 1 for b [SEP], 0 padding
  int64_t label_id = 0;              ///< index into the processor's labels(); 0 for regression
  float label_value = 0.0F;          ///< regression target (the numeric label); 0 otherwise
};

/// Tokens and segment ids before id lookup and padding.
struct PackedTokens {
  std::vector<std::string> tokens;   ///< [CLS] a... [SEP] (b... [SEP])
  std::vector<int64_t> segment_ids;  ///< one per token
};

/// Google's _truncate_seq_pair: while the pair is longer than `max_length` tokens, drop the
/// last token of the longer sequence; on a tie drop from `b`.
void truncate_seq_pair(std::vector<std::string>& tokens_a, std::vector<std::string>& tokens_b,
                       size_t max_length);

/// Truncates and lays out `tokens_a` / `tokens_b` for `max_seq_length` (at least 3). An empty
/// `tokens_b` means a single sequence, as in Google's `if tokens_b:` (also when text_b was
/// non-empty but tokenized to nothing): cut to max_seq_length - 2, no second [SEP].
PackedTokens pack_tokens(std::vector<std::string> tokens_a, std::vector<std::string> tokens_b,
                         int64_t max_seq_length);

/// Tokenizes, packs, looks up ids, pads, and maps the label to its index in `labels`, or, when
/// `labels` is empty (regression), parses it as a number. Throws DataError naming the guid when
/// the label is not in `labels` / not a number.
InputFeatures convert_single_example(const InputExample& example,
                                     const std::vector<std::string>& labels, int64_t max_seq_length,
                                     const FullTokenizer& tokenizer);

/// convert_single_example over all `examples`.
std::vector<InputFeatures> convert_examples(const std::vector<InputExample>& examples,
                                            const std::vector<std::string>& labels,
                                            int64_t max_seq_length, const FullTokenizer& tokenizer);

}  // namespace bertlab::classifier
