#pragma once
// Reading pretraining instances: one at a time from a byte offset of a .jsonl or TFRecord file
// (for streaming), all of a file (in memory), and collating them into a Batch.

#include <bertlab/task.h>

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "create_data.h"
#include "tf_example.h"

namespace bertlab::pretrain {

/// What an instance must look like: its lengths and the model's vocabulary size.
struct InstanceShape {
  int64_t max_seq_length = 128;
  int64_t max_predictions_per_seq = 20;
  int64_t vocab_size = -1;  ///< token ids must be below it; -1: not checked
};

/// Where a reader stands in its file: a record boundary.
struct FilePosition {
  uint64_t offset = 0;  ///< bytes before the next record
  int64_t record = 0;   ///< lines (.jsonl) or records (TFRecord) before it, for messages
};

/// The instances of one .jsonl file (one JSON object per line; blank lines skipped) or TFRecord
/// file of tf.train.Examples, read in order from a position.
class InstanceReader {
 public:
  InstanceReader(std::filesystem::path path, InstanceShape shape, FilePosition start = {});

  /// Reads the next instance into *out, or skips it unparsed when out is nullptr. False at the
  /// end of the file. Throws DataError naming the file and line or record for a malformed
  /// instance, a length other than the shape's or a token id outside the vocabulary.
  bool next(InstanceFeatures* out);
  FilePosition position() const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  InstanceShape shape_;
  bool jsonl_ = false;
  std::ifstream lines_;                    // .jsonl
  FilePosition line_position_;             // .jsonl
  std::optional<TfRecordReader> records_;  // TFRecord
};

/// Whether `path` is read as JSON Lines (its extension is .jsonl) rather than as a TFRecord.
bool is_jsonl(const std::filesystem::path& path);

/// The first `limit` instances of a file (-1: all). Throws DataError for a file without any.
std::vector<InstanceFeatures> read_instances(const std::filesystem::path& path,
                                             const InstanceShape& shape, int64_t limit = -1);

/// input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights
/// ([rows, slots] float) and next_sentence_labels ([rows]) of set[indices], on `device`.
Batch collate(const std::vector<InstanceFeatures>& set, const std::vector<int64_t>& indices,
              const c10::Device& device);

}  // namespace bertlab::pretrain
