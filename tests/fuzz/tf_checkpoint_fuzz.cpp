// The TensorFlow checkpoint reader: the input is the `.index` table (LevelDB blocks of
// BundleEntryProto records: dtypes, shapes, shard offsets, sizes, CRCs); the data shard is the
// tiny-tf fixture's, so offsets and sizes the input claims are checked against a real shard.

#include <bertlab/io/tf_checkpoint.h>

#include <fstream>
#include <iterator>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bertlab;
  static const std::string shard = [] {
    std::ifstream in(fuzz::test_data("checkpoints/tiny-tf/bert_model.ckpt.data-00000-of-00001"),
                     std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }();
  static const bool shard_written = [] {
    fuzz::write_scratch("model.ckpt.data-00000-of-00001",
                        reinterpret_cast<const uint8_t*>(shard.data()), shard.size());
    return true;
  }();
  (void)shard_written;
  const auto index = fuzz::write_scratch("model.ckpt.index", data, size);
  fuzz::expect_only_bertlab_errors([&] {
    const NamedTensors tensors = read_tf_checkpoint(index.parent_path() / "model.ckpt");
    for (const auto& [name, tensor] : tensors) (void)tensor.sum();
  });
  return 0;
}
