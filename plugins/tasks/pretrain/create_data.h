#pragma once
// Pretraining instances from text, as Google's create_pretraining_data.py makes them: the same
// documents, the same random choices (CPython's generator), the same instances in the same order.
// With next_sentence = false, masked-LM-only instances instead: single segments packed from
// consecutive sentences of a document (RoBERTa's DOC-SENTENCES), masked as Google masks.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
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
  /// true: Google's sentence pairs with next-sentence labels; false: one segment per instance,
  /// [CLS] sentences [SEP], packed from a document's consecutive sentences, label 0.
  bool next_sentence = true;

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
/// documents removed. Lines are tokenized on `threads` threads (the documents do not depend on
/// it). Throws DataError naming the file and line of invalid UTF-8, and of the first token the
/// vocabulary cannot give an id (a vocabulary without [UNK]).
std::vector<Document> read_documents(const std::vector<std::filesystem::path>& files,
                                     const FullTokenizer& tokenizer, int threads = 1);

/// One instance held by an InstanceStore: views into the store's arrays.
struct InstanceView {
  const int32_t* tokens = nullptr;            ///< [CLS] A [SEP] B [SEP], masks applied
  size_t length = 0;                          ///< tokens
  size_t segment_a_length = 0;                ///< tokens of segment 0: [CLS] A [SEP]
  bool is_random_next = false;                ///< B comes from another document
  const int32_t* masked_positions = nullptr;  ///< [prediction] token position, ascending
  const int32_t* masked_labels = nullptr;     ///< [prediction] the original token's id
  size_t masked = 0;                          ///< predictions
};

/// Every instance of a run, held compactly until Google's final shuffle decides the order they
/// are written in: each instance's tokens, masked positions and labels one after the other in
/// large blocks (4 bytes a token, 8 a prediction, 16 for the rest), never moved once written.
class InstanceStore {
 public:
  /// Appends an instance; `masked` holds (position, original id) pairs in ascending position.
  void add(const std::vector<int32_t>& tokens, size_t segment_a_length, bool is_random_next,
           const std::vector<std::pair<int32_t, int32_t>>& masked);
  size_t size() const { return entries_.size(); }
  /// Instance i in the order of creation.
  InstanceView operator[](size_t i) const;
  /// The order the instances are written in (Google's shuffle of them); set by
  /// create_instances().
  const std::vector<uint32_t>& order() const { return order_; }
  void set_order(std::vector<uint32_t> order) { order_ = std::move(order); }
  /// The bytes the store holds (blocks and entries).
  size_t bytes() const;

 private:
  struct Entry {
    const int32_t* data;  ///< tokens, then masked positions, then masked labels
    uint32_t length;
    uint32_t segment_a_length;
    uint32_t masked;
    bool is_random_next;
  };
  static constexpr size_t kBlockValues = size_t{1} << 20;  ///< 4 MiB blocks
  std::vector<std::unique_ptr<int32_t[]>> blocks_;         // NOLINT(*-avoid-c-arrays)
  size_t block_used_ = kBlockValues;
  size_t block_size_ = 0;
  std::vector<Entry> entries_;
  std::vector<uint32_t> order_;
};

/// create_training_instances after the reading: shuffles the documents, makes dupe_factor passes
/// of create_instances_from_document (or, with next_sentence = false, of the single-segment
/// packing) and shuffles the instances (the store's order()), all with `rng`.
InstanceStore create_instances(std::vector<Document> documents, const FullTokenizer& tokenizer,
                               const CreateDataOptions& options, PyRandom& rng);

/// The instances of create_instances() as TrainingInstances, in the written (shuffled) order.
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

/// One JSON Lines object with the seven features, as the oracle prints them (json.dumps); the
/// general encoding, which append_instance_json_line() gives directly.
std::string features_to_json_line(const InstanceFeatures& features);

/// The lengths an instance's features are written at: max_seq_length tokens,
/// max_predictions_per_seq predictions of which the first `masked` are real. Throws Error for an
/// instance longer than max_seq_length.
struct PaddedShape {
  size_t seq = 0;
  size_t predictions = 0;
  size_t masked = 0;
};
PaddedShape padded_shape(const InstanceView& instance, int64_t max_seq_length,
                         int64_t max_predictions_per_seq);

/// Appends the JSON line (with its newline) of `instance`'s features: byte for byte
/// features_to_json_line(instance_features(...)) + "\n", without building them.
void append_instance_json_line(std::string& out, const InstanceView& instance,
                               int64_t max_seq_length, int64_t max_predictions_per_seq);

}  // namespace bertlab::pretrain
