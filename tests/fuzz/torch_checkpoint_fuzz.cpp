// The PyTorch checkpoint reader on arbitrary bytes: the zip archive, the restricted unpickler
// of data.pkl, and the storages it points into.

#include <bertlab/io/torch_checkpoint.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bertlab;
  const auto path = fuzz::write_scratch("pytorch_model.bin", data, size);
  fuzz::expect_only_bertlab_errors([&] {
    const NamedTensors tensors = read_torch_checkpoint(path);
    for (const auto& [name, tensor] : tensors) (void)tensor.sum();
  });
  return 0;
}
