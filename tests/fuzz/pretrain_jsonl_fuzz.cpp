// Pretraining instances as JSON Lines (bertlab pretrain create-data --output_format jsonl).

#include "pretrain_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bertlab::fuzz::read_pretrain_instances("instances.jsonl", data, size);
  return 0;
}
