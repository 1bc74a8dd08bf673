#pragma once
// tf.train.Example records, as Google's create_pretraining_data.py writes them and
// run_pretraining.py reads them, in TFRecord files (the framing: bertlab/io/tfrecord.h).

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <bertlab/io/tfrecord.h>

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

/// Appends the framed TFRecord of `instance`'s tf.train.Example: byte for byte
/// append_tfrecord(serialize_example(to_example(instance_features(...)))), encoded directly.
void append_instance_record(std::string& out, const InstanceView& instance, int64_t max_seq_length,
                            int64_t max_predictions_per_seq);

// The framing and the file classes are the SDK's (bertlab/io/tfrecord.h).
using ::bertlab::read_tfrecords;
using ::bertlab::TfRecordReader;
using ::bertlab::TfRecordWriter;

}  // namespace bertlab::pretrain
