#pragma once
// TFRecord files of tf.train.Example, as Google's run_pretraining.py reads them: each record is
// uint64 length, masked CRC-32C of the length, the serialized Example, masked CRC-32C of it.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "create_data.h"

namespace bertlab::pretrain {

/// One feature of an Example: an Int64List or a FloatList.
using FeatureValues = std::variant<std::vector<int64_t>, std::vector<float>>;
/// An Example's features in the order written (read back in file order).
using ExampleFeatures = std::vector<std::pair<std::string, FeatureValues>>;

/// The serialized tf.train.Example of `features` (packed repeated values, as TensorFlow writes).
std::string serialize_example(const ExampleFeatures& features);

/// Parses a serialized tf.train.Example; throws DataError (`what` names the record) for
/// malformed protobuf or feature kinds other than int64 and float lists.
ExampleFeatures parse_example(std::string_view bytes, const std::string& what);

/// Google's seven features of an instance, in write_instance_to_example_files's order.
ExampleFeatures to_example(const InstanceFeatures& features);

/// A file written as NAME.partial and renamed to NAME by close(), so that an interrupted run
/// never leaves a truncated NAME (nor replaces an earlier complete one).
class PartialFile {
 public:
  explicit PartialFile(std::filesystem::path path);
  ~PartialFile();
  PartialFile(const PartialFile&) = delete;
  PartialFile& operator=(const PartialFile&) = delete;
  void write(std::string_view bytes);
  /// Flushes and renames; throws Error naming the file when writing failed.
  void close();

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_;
  std::ofstream out_;
  bool closed_ = false;
};

/// Writes framed records to a PartialFile.
class TfRecordWriter {
 public:
  explicit TfRecordWriter(std::filesystem::path path) : file_(std::move(path)) {}
  void write(std::string_view record);
  void close() { file_.close(); }

 private:
  PartialFile file_;
};

/// Every record of a TFRecord file, checksums verified. Throws DataError naming the file and the
/// record's offset for a truncated record or a checksum mismatch.
std::vector<std::string> read_tfrecords(const std::filesystem::path& path);

}  // namespace bertlab::pretrain
