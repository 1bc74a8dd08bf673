#pragma once
// TFRecord files, as TensorFlow's RecordWriter writes them: each record is its uint64 length
// (little-endian), the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the
// data. Used by the pretrain task (tf.train.Example files) and by the TensorBoard event writer.

#include <bertlab/io/atomic_file.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace bertlab {

/// The bytes of one framed record holding `data`.
std::string frame_tfrecord(std::string_view data);
/// Appends the framed record holding `data` to `out` (frame_tfrecord() without the copy).
void append_tfrecord(std::string& out, std::string_view data);

/// Writes framed records to NAME.partial; close() puts NAME in place (bertlab/io/atomic_file.h),
/// so an interrupted run never leaves a truncated NAME nor replaces an earlier complete one.
class TfRecordWriter {
 public:
  explicit TfRecordWriter(std::filesystem::path path) : file_(std::move(path)) {}
  void write(std::string_view record);
  void close() { file_.commit(); }

 private:
  AtomicFile file_;
};

/// The records of a TFRecord file one at a time, from a byte offset (a record boundary).
class TfRecordReader {
 public:
  /// `index` is the number of the record at `offset`, for messages.
  explicit TfRecordReader(std::filesystem::path path, uint64_t offset = 0, int64_t index = 0);
  /// The next record into *record with both checksums verified, or, when record is nullptr,
  /// skipped with only its length checked. False at the end of the file. Throws DataError
  /// naming the file, the record and its byte offset for a truncated or corrupt record.
  bool next(std::string* record);
  /// The offset of the next record.
  uint64_t offset() const { return offset_; }
  /// The number of the next record.
  int64_t index() const { return index_; }

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;
  int64_t index_ = 0;
};

/// Every record of a TFRecord file, checksums verified. Throws DataError naming the file and the
/// record's offset for a truncated record or a checksum mismatch.
std::vector<std::string> read_tfrecords(const std::filesystem::path& path);

}  // namespace bertlab
