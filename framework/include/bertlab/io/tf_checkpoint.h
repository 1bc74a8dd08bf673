#pragma once
// TensorFlow checkpoints as Google BERT publishes them: `bert_model.ckpt.index`, a LevelDB-format
// table of BundleEntryProto records keyed by variable name, and the data shards
// `bert_model.ckpt.data-SSSSS-of-NNNNN` holding each tensor's raw little-endian bytes.

#include <ATen/core/Tensor.h>
#include <bertlab/io/safetensors.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bertlab {

/// One variable's record in the index.
struct TfTensorInfo {
  std::string name;            ///< TF variable name, e.g. bert/encoder/layer_0/output/dense/kernel
  at::ScalarType dtype;        ///< from the record's DataType
  std::vector<int64_t> shape;  ///< TF dimension order (a kernel is [in, out])
  int32_t shard = 0;           ///< which data file
  uint64_t offset = 0;         ///< byte offset in the shard
  uint64_t size = 0;           ///< bytes in the shard
  uint32_t crc32c = 0;         ///< CRC-32C of those bytes (unmasked)
};

/// The index file of a checkpoint named as Google's --init_checkpoint names it (the prefix
/// `.../bert_model.ckpt`), or by its `.index` file or one of its `.data-*` shards. Throws
/// DataError when there is none.
std::filesystem::path tf_checkpoint_index_path(const std::filesystem::path& path);

/// Whether `file` is a LevelDB-format table (by its footer's magic number, not its name).
bool is_tf_checkpoint_index(const std::filesystem::path& file);

/// Every record of the index, in key order (the header record is checked, not returned).
/// `path` names the checkpoint in any of the ways tf_checkpoint_index_path() accepts.
/// Throws DataError naming the file for a corrupt table, a big-endian checkpoint, a sliced
/// (partitioned) variable or an unsupported dtype.
std::vector<TfTensorInfo> read_tf_checkpoint_index(const std::filesystem::path& path);

/// Every tensor of the checkpoint (CPU, TF names and shapes, in index key order), each verified
/// against its CRC-32C; `path` as for read_tf_checkpoint_index(). Each record's offset and size
/// are checked against its shard's size before any byte is read. Throws DataError naming the
/// file and tensor for a missing or short shard and for a checksum mismatch.
NamedTensors read_tf_checkpoint(const std::filesystem::path& path);

}  // namespace bertlab
