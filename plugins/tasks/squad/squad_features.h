#pragma once
// Model inputs of SQuAD examples, as run_squad.py's convert_examples_to_features.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "squad_data.h"

namespace bertlab {
class FullTokenizer;
}

namespace bertlab::squad {

/// run_squad.py's unique_id of the first feature.
inline constexpr int64_t kFirstUniqueId = 1000000000;

struct FeatureOptions {
  int64_t max_seq_length = 384;   ///< tokens per feature with [CLS] and the two [SEP]s
  int64_t doc_stride = 128;       ///< tokens between the starts of consecutive document windows
  int64_t max_query_length = 64;  ///< question tokens kept (the first ones)
  bool is_training = false;       ///< compute start/end positions
};

/// One window of one example, as run_squad.py's InputFeatures:
/// tokens = [CLS] query [SEP] doc-span [SEP], padded with 0 ids to max_seq_length.
struct SquadFeature {
  int64_t unique_id = 0;            ///< kFirstUniqueId + feature number, over all examples
  int64_t example_index = 0;        ///< [example] the feature belongs to
  int64_t doc_span_index = 0;       ///< [window] within its example
  std::vector<std::string> tokens;  ///< [token position], without padding
  /// [token position] → [word] of the example's doc_tokens; -1 for [CLS], query and [SEP]s.
  /// Same length as tokens.
  std::vector<int32_t> token_to_orig;
  /// [token position] → whether this window is the max-context one of that document token
  /// (Google's _check_is_max_context); meaningful where token_to_orig >= 0.
  std::vector<uint8_t> token_is_max_context;
  std::vector<int32_t> input_ids;    ///< [max_seq_length]
  std::vector<int32_t> input_mask;   ///< [max_seq_length] 1 for real tokens
  std::vector<int32_t> segment_ids;  ///< [max_seq_length] 0 query side, 1 document side
  int64_t start_position = 0;        ///< training: answer start [token position]; 0 out of span
  int64_t end_position = 0;          ///< training: answer end [token position]; 0 out of span
  bool is_impossible = false;        ///< training: the example is impossible (v2)
};

/// Makes the features of one example at a time (a paragraph's words are tokenized once for its
/// consecutive questions), so that blocks of examples can be converted on several threads.
class FeatureMaker {
 public:
  FeatureMaker(const FullTokenizer& tokenizer, const FeatureOptions& options);
  ~FeatureMaker();
  FeatureMaker(const FeatureMaker&) = delete;
  FeatureMaker& operator=(const FeatureMaker&) = delete;
  /// Appends the features of examples[example_index] to `out`, numbered from `unique_id`;
  /// returns how many.
  size_t add(const std::vector<SquadExample>& examples, size_t example_index, int64_t unique_id,
             std::vector<SquadFeature>& out);

 private:
  struct Cache;
  const FullTokenizer& tokenizer_;
  FeatureOptions options_;
  int32_t cls_id_;
  int32_t sep_id_;
  std::unique_ptr<Cache> cache_;
};

/// All features of `examples`, in example order then window order.
std::vector<SquadFeature> convert_examples_to_features(const std::vector<SquadExample>& examples,
                                                       const FullTokenizer& tokenizer,
                                                       const FeatureOptions& options);

/// One line of `bertlab squad features`: a JSON object with unique_id, example_index,
/// doc_span_index, tokens, token_to_orig_map, token_is_max_context (objects keyed by the token
/// position as a string, document tokens only), input_ids, input_mask, segment_ids,
/// start_position and end_position (null when not training) and is_impossible. No newline.
std::string feature_to_json_line(const SquadFeature& feature, bool is_training);

/// Appends that line and its newline, written directly: byte for byte
/// feature_to_json_line(feature, is_training) + "\n".
void append_feature_json_line(std::string& out, const SquadFeature& feature, bool is_training);

}  // namespace bertlab::squad
