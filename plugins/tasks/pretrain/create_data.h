#pragma once
// Pretraining instances from text, as Google's create_pretraining_data.py makes them: the same
// documents, the same random choices (CPython's generator), the same instances in the same order.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bertlab {
class FullTokenizer;
}

namespace bertlab::pretrain {

class PyRandom;

struct CreateDataOptions {
  int64_t max_seq_length = 128;          ///< tokens per instance, [CLS] and two [SEP]s included
  int64_t max_predictions_per_seq = 20;  ///< most masked positions per instance
  int64_t random_seed = 12345;           ///< seed of random.Random
  int64_t dupe_factor = 10;              ///< passes over the documents, each with other masks
  double masked_lm_prob = 0.15;          ///< share of the tokens masked
  double short_seq_prob = 0.1;           ///< share of the instances with a shorter target length
  bool do_whole_word_mask = false;       ///< mask all pieces of a word together

  /// One rule per line; throws ConfigError naming the flag and value.
  void validate() const;
};

/// A sentence: the ids of its word pieces.
using Sentence = std::vector<int32_t>;
/// A document: its non-empty sentences (lines) in order.
using Document = std::vector<Sentence>;

/// One instance, as create_pretraining_data.py's TrainingInstance (token ids, not strings).
struct TrainingInstance {
  std::vector<int32_t> tokens;               ///< [CLS] A [SEP] B [SEP], masks applied
  std::vector<int32_t> segment_ids;          ///< 0 for [CLS] A [SEP], 1 for B [SEP]
  bool is_random_next = false;               ///< B comes from another document
  std::vector<int32_t> masked_lm_positions;  ///< [prediction] token position, ascending
  std::vector<int32_t> masked_lm_labels;     ///< [prediction] the original token's id
};

/// The documents of `files` read as Google does: one sentence per line, a blank line (after
/// Python's str.strip()) starts a new document, lines whose tokens are empty are dropped, empty
/// documents removed. Throws DataError naming the file and line of invalid UTF-8, and of a token
/// the vocabulary cannot give an id (a vocabulary without [UNK]).
std::vector<Document> read_documents(const std::vector<std::filesystem::path>& files,
                                     const FullTokenizer& tokenizer);

/// create_training_instances after the reading: shuffles the documents, makes dupe_factor passes
/// of create_instances_from_document and shuffles the instances, all with `rng`.
std::vector<TrainingInstance> create_training_instances(std::vector<Document> documents,
                                                        const FullTokenizer& tokenizer,
                                                        const CreateDataOptions& options,
                                                        PyRandom& rng);

/// The features Google writes for one instance (write_instance_to_example_files).
struct InstanceFeatures {
  std::vector<int64_t> input_ids;             ///< [max_seq_length], 0-padded
  std::vector<int64_t> input_mask;            ///< [max_seq_length]
  std::vector<int64_t> segment_ids;           ///< [max_seq_length]
  std::vector<int64_t> masked_lm_positions;   ///< [max_predictions_per_seq], 0-padded
  std::vector<int64_t> masked_lm_ids;         ///< [max_predictions_per_seq], 0-padded
  std::vector<float> masked_lm_weights;       ///< [max_predictions_per_seq] 1.0 real, 0.0 padding
  std::vector<int64_t> next_sentence_labels;  ///< [1] 1 when B is the random next
};

InstanceFeatures instance_features(const TrainingInstance& instance, int64_t max_seq_length,
                                   int64_t max_predictions_per_seq);

/// One JSON Lines object with the seven features, as the oracle prints them (json.dumps).
std::string features_to_json_line(const InstanceFeatures& features);

}  // namespace bertlab::pretrain
