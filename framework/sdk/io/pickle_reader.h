#pragma once
// A restricted unpickler for the data.pkl of a torch.save zip archive: it understands the pickle
// opcodes torch.save writes (protocol 2, plus the protocol 3-5 ones that carry the same data) and
// builds only None, bools, ints, floats, strings, bytes, tuples, lists, dicts and tensors. The
// only globals it resolves are the tensor-rebuilding ones torch.save references; any other
// global is refused at the opcode that names it, before anything is built, so a checkpoint can
// never run code (Python's pickle.load would call whatever the file names, e.g. os.system).
//
// Every read is bounds-checked against the pickle, and every allocation is bounded by bytes the
// pickle or a storage record actually holds: truncated, corrupt or hostile input throws
// DataError naming the source and the byte offset of the offending opcode.

#include <ATen/core/Tensor.h>
#include <bertlab/io/safetensors.h>

#include <functional>
#include <string>
#include <string_view>

namespace bertlab {

/// The bytes of the storage record `data/<key>` of a torch.save archive, as a 1-D contiguous CPU
/// uint8 tensor. Throws DataError when the archive has no such record.
using StorageRecordLoader = std::function<at::Tensor(const std::string& key)>;

/// Unpickles `pickle` (torch.save's data.pkl) and returns the tensors of its top-level dict (an
/// OrderedDict for a state dict) in the pickle's order, as read_torch_checkpoint documents:
/// nested dicts flattened to `outer.inner`, leaves that are not tensors skipped, every tensor a
/// contiguous CPU copy. Storages are fetched through `load_record` once per key and shared by
/// the tensors that view them. `source` starts every error message (e.g. "model.bin: data.pkl").
NamedTensors unpickle_state_dict(std::string_view pickle, const StorageRecordLoader& load_record,
                                 const std::string& source);

}  // namespace bertlab
