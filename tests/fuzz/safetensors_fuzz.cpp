// The safetensors reader on arbitrary bytes (header length, JSON header, offsets, data).

#include <bertlab/io/safetensors.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bertlab;
  const auto path = fuzz::write_scratch("model.safetensors", data, size);
  fuzz::expect_only_bertlab_errors([&] {
    std::map<std::string, std::string> metadata;
    const NamedTensors tensors = read_safetensors(path, &metadata);
    for (const auto& [name, tensor] : tensors) (void)tensor.sum();  // touch every byte
  });
  return 0;
}
