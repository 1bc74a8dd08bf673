// Pretraining instances as a TFRecord of tf.train.Examples (Google's create_pretraining_data.py):
// record framing, masked CRC-32Cs and the protobuf of each Example.

#include "pretrain_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bertlab::fuzz::read_pretrain_instances("instances.tfrecord", data, size);
  return 0;
}
