#pragma once
// Pretraining instances read one by one from a file of the given name (its extension picks
// JSON Lines or TFRecord), shaped as the tests' tiny model expects, then collated.

#include <c10/core/Device.h>

#include "fuzz_util.h"
#include "instance_reader.h"

namespace bertlab::fuzz {

inline void read_pretrain_instances(const char* name, const uint8_t* data, size_t size) {
  quiet_logs();
  const auto path = write_scratch(name, data, size);
  expect_only_bertlab_errors([&] {
    pretrain::InstanceShape shape;
    shape.max_seq_length = 128;
    shape.max_predictions_per_seq = 20;
    shape.vocab_size = 30522;
    pretrain::InstanceReader reader(path, shape);
    std::vector<pretrain::InstanceFeatures> read;
    pretrain::InstanceFeatures instance;
    while (read.size() < 64 && reader.next(&instance)) read.push_back(instance);
    std::vector<int64_t> rows(read.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
    if (!read.empty()) (void)pretrain::collate(read, rows, c10::Device(c10::kCPU));
  });
}

}  // namespace bertlab::fuzz
