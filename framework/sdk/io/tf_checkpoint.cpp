#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/crc32c.h>
#include <bertlab/io/tf_checkpoint.h>
#include <fcntl.h>
#include <fmt/ranges.h>
#include <leveldb/env.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/table.h>
#include <snappy.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string_view>
#include <utility>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

/// LevelDB's table magic number (table/format.h kTableMagicNumber), the last 8 bytes of the
/// footer, stored little-endian.
constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
/// LevelDB's footer: two block handles padded to 40 bytes, then the magic number.
constexpr uint64_t kTableFooterBytes = 48;

// ---------------------------------------------------------------------------------------------
// Protobuf wire format, decoded by hand: only what tensor_bundle.proto needs.

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

/// A bounds-checked reader over one serialized message. Every overrun or malformed field throws
/// DataError prefixed with `where` (file, record and message type).
class WireReader {
 public:
  WireReader(std::string_view bytes, std::string where)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())),
        end_(p_ + bytes.size()),
        where_(std::move(where)) {}

  /// Reads the next field's tag; false at the end of the message.
  bool next(uint32_t* field, uint32_t* wire) {
    if (p_ == end_) return false;
    const uint64_t tag = varint();
    *field = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7u);
    if (*field == 0 || tag >> 3 > (uint64_t{1} << 29)) fail(fmt::format("invalid tag {}", tag));
    return true;
  }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) fail("a varint runs past the end of the message");
      const uint8_t byte = *p_++;
      // The tenth byte may only carry the top bit of a 64-bit value.
      if (shift == 63 && byte > 1) fail("a varint is longer than 64 bits");
      v |= static_cast<uint64_t>(byte & 0x7fu) << shift;
      if ((byte & 0x80u) == 0) return v;
    }
    fail("a varint is longer than 10 bytes");
  }

  uint32_t fixed32() { return static_cast<uint32_t>(fixed(4)); }
  uint64_t fixed64() { return fixed(8); }

  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > remaining()) {
      fail(fmt::format("a {}-byte field runs past the end of the message ({} bytes left)", n,
                       remaining()));
    }
    std::string_view out(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return out;
  }

  /// Skips a field of wire type `wire` (an unknown field).
  void skip(uint32_t wire) {
    switch (wire) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        fixed(8);
        return;
      case kLengthDelimited:
        bytes();
        return;
      case kFixed32:
        fixed(4);
        return;
      default:
        fail(fmt::format("unsupported wire type {}", wire));
    }
  }

  /// Checks that `field` arrived with the wire type its schema gives.
  void expect(uint32_t field, uint32_t wire, uint32_t want) const {
    if (wire != want) {
      fail(fmt::format("field {} has wire type {}, expected {}", field, wire, want));
    }
  }

  /// A field's value, after checking that it arrived with the wire type its schema gives.
  uint64_t varint_field(uint32_t field, uint32_t wire) {
    expect(field, wire, kVarint);
    return varint();
  }
  uint32_t fixed32_field(uint32_t field, uint32_t wire) {
    expect(field, wire, kFixed32);
    return fixed32();
  }
  std::string_view bytes_field(uint32_t field, uint32_t wire) {
    expect(field, wire, kLengthDelimited);
    return bytes();
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(fmt::format("{}: {}; the index is corrupt", where_, what));
  }

 private:
  uint64_t remaining() const { return static_cast<uint64_t>(end_ - p_); }

  uint64_t fixed(int n) {
    if (remaining() < static_cast<uint64_t>(n)) {
      fail(fmt::format("a {}-byte field runs past the end of the message", n));
    }
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p_[i];
    p_ += n;
    return v;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  std::string where_;
};

// ---------------------------------------------------------------------------------------------
// tensor_bundle.proto and its dependencies (tensorflow/core/protobuf/tensor_bundle.proto,
// framework/types.proto, framework/tensor_shape.proto).

/// BundleHeaderProto.
struct BundleHeader {
  int32_t num_shards = 0;
  uint64_t endianness = 0;  ///< 0 LITTLE, 1 BIG
};

/// BundleEntryProto, before validation.
struct BundleEntry {
  uint64_t dtype = 0;  ///< DataType enum value
  std::vector<int64_t> shape;
  bool unknown_rank = false;
  int32_t shard_id = 0;
  int64_t offset = 0;
  int64_t size = 0;
  uint32_t masked_crc32c = 0;
  int slices = 0;  ///< how many TensorSliceProto records (a partitioned variable)
};

/// Calls `on_field(field, wire, reader)` for every field of the message in `bytes`; a field it
/// does not read (it returns false) is skipped, as protobuf skips unknown fields.
template <typename OnField>
void for_each_field(std::string_view bytes, const std::string& where, OnField&& on_field) {
  WireReader r(bytes, where);
  uint32_t field = 0, wire = 0;
  while (r.next(&field, &wire)) {
    if (!on_field(field, wire, r)) r.skip(wire);
  }
}

BundleHeader parse_header(std::string_view bytes, const std::string& where) {
  BundleHeader h;
  for_each_field(bytes, where, [&](uint32_t field, uint32_t wire, WireReader& r) {
    switch (field) {
      case 1:  // int32 num_shards
        h.num_shards = static_cast<int32_t>(r.varint_field(field, wire));
        return true;
      case 2:  // Endianness endianness
        h.endianness = r.varint_field(field, wire);
        return true;
      default:  // 3: VersionDef version, and anything newer
        return false;
    }
  });
  return h;
}

/// TensorShapeProto.Dim: the size (field 1); the name (field 2) is unused.
int64_t parse_dim(std::string_view bytes, const std::string& where) {
  int64_t size = 0;
  for_each_field(bytes, where, [&](uint32_t field, uint32_t wire, WireReader& r) {
    if (field != 1) return false;
    size = static_cast<int64_t>(r.varint_field(field, wire));
    return true;
  });
  return size;
}

/// TensorShapeProto: repeated Dim dim = 2; bool unknown_rank = 3.
void parse_shape(std::string_view bytes, const std::string& where, BundleEntry* e) {
  for_each_field(bytes, where, [&](uint32_t field, uint32_t wire, WireReader& r) {
    if (field == 2) {
      e->shape.push_back(parse_dim(r.bytes_field(field, wire), where + ".dim"));
    } else if (field == 3) {
      e->unknown_rank = r.varint_field(field, wire) != 0;
    } else {
      return false;
    }
    return true;
  });
}

BundleEntry parse_entry(std::string_view bytes, const std::string& where) {
  BundleEntry e;
  for_each_field(bytes, where, [&](uint32_t field, uint32_t wire, WireReader& r) {
    switch (field) {
      case 1:  // DataType dtype
        e.dtype = r.varint_field(field, wire);
        return true;
      case 2:  // TensorShapeProto shape
        parse_shape(r.bytes_field(field, wire), where + ".shape", &e);
        return true;
      case 3:  // int32 shard_id
        e.shard_id = static_cast<int32_t>(r.varint_field(field, wire));
        return true;
      case 4:  // int64 offset
        e.offset = static_cast<int64_t>(r.varint_field(field, wire));
        return true;
      case 5:  // int64 size
        e.size = static_cast<int64_t>(r.varint_field(field, wire));
        return true;
      case 6:  // fixed32 crc32c (masked)
        e.masked_crc32c = r.fixed32_field(field, wire);
        return true;
      case 7:  // repeated TensorSliceProto slices
        r.bytes_field(field, wire);
        ++e.slices;
        return true;
      default:
        return false;
    }
  });
  return e;
}

struct TfDtype {
  uint64_t number;   ///< tensorflow.DataType
  const char* name;  ///< its enum name
  bool supported;    ///< whether `type` holds it
  at::ScalarType type;
};

constexpr TfDtype kTfDtypes[] = {
    {1, "DT_FLOAT", true, at::kFloat},        {2, "DT_DOUBLE", true, at::kDouble},
    {3, "DT_INT32", true, at::kInt},          {4, "DT_UINT8", true, at::kByte},
    {5, "DT_INT16", true, at::kShort},        {6, "DT_INT8", true, at::kChar},
    {7, "DT_STRING", false, at::kByte},       {8, "DT_COMPLEX64", false, at::kByte},
    {9, "DT_INT64", true, at::kLong},         {10, "DT_BOOL", true, at::kBool},
    {14, "DT_BFLOAT16", true, at::kBFloat16}, {17, "DT_UINT16", false, at::kByte},
    {18, "DT_COMPLEX128", false, at::kByte},  {19, "DT_HALF", true, at::kHalf},
    {20, "DT_RESOURCE", false, at::kByte},    {21, "DT_VARIANT", false, at::kByte},
    {22, "DT_UINT32", false, at::kByte},      {23, "DT_UINT64", false, at::kByte},
};

/// The ATen dtype of TF DataType `number`; throws DataError (via `fail`) when there is none.
template <typename Fail>
at::ScalarType scalar_type_of(uint64_t number, Fail&& fail) {
  for (const auto& d : kTfDtypes) {
    if (d.number != number) continue;
    if (d.supported) return d.type;
    throw fail(fmt::format("dtype {} ({}) is not supported; only numeric and bool tensors are read",
                           d.name, number));
  }
  throw fail(
      fmt::format("dtype {} is not supported; only numeric and bool tensors are read", number));
}

/// A checked element count of `shape`.
template <typename Fail>
uint64_t numel_of(const std::vector<int64_t>& shape, Fail&& fail) {
  uint64_t numel = 1;
  for (const int64_t d : shape) {
    if (d < 0) throw fail(fmt::format("the shape has a negative dimension {}", d));
    const auto dim = static_cast<uint64_t>(d);
    if (dim != 0 && numel > (uint64_t{1} << 62) / dim) throw fail("the shape is too large");
    numel *= dim;
  }
  return numel;
}

TfTensorInfo validate_entry(std::string name, const BundleEntry& e, int32_t num_shards,
                            const std::string& where) {
  auto fail = [&](const std::string& what) {
    return DataError(fmt::format("{}: tensor '{}': {}", where, name, what));
  };
  if (e.slices > 0) {
    throw fail(fmt::format(
        "partitioned variable not supported (the record lists {} slices); save the checkpoint "
        "with unpartitioned variables",
        e.slices));
  }
  TfTensorInfo info;
  info.dtype = scalar_type_of(e.dtype, fail);
  if (e.unknown_rank) throw fail("the shape has an unknown rank");
  const uint64_t numel = numel_of(e.shape, fail);
  if (e.shard_id < 0 || e.shard_id >= num_shards) {
    throw fail(
        fmt::format("shard_id {} is outside the header's {} shards", e.shard_id, num_shards));
  }
  if (e.offset < 0 || e.size < 0) {
    throw fail(fmt::format("negative offset {} or size {}", e.offset, e.size));
  }
  const uint64_t expected = numel * static_cast<uint64_t>(c10::elementSize(info.dtype));
  if (static_cast<uint64_t>(e.size) != expected) {
    throw fail(fmt::format("the record says {} bytes but dtype {} and shape [{}] need {}", e.size,
                           c10::toString(info.dtype), fmt::join(e.shape, ", "), expected));
  }
  info.name = std::move(name);
  info.shape = e.shape;
  info.shard = e.shard_id;
  info.offset = static_cast<uint64_t>(e.offset);
  info.size = static_cast<uint64_t>(e.size);
  // TensorFlow's BundleWriter stores crc32c::Mask(crc) and BundleReader compares Unmask().
  info.crc32c = crc32c_unmask(e.masked_crc32c);
  return info;
}

// ---------------------------------------------------------------------------------------------
// The index: a LevelDB-format table.

using Records = std::vector<std::pair<std::string, std::string>>;

[[noreturn]] void throw_leveldb(const fs::path& file, const char* what,
                                const leveldb::Status& status) {
  throw DataError(
      fmt::format("{}: {} the checkpoint index (a LevelDB table) failed: {}; the file "
                  "is corrupt or truncated",
                  file.string(), what, status.ToString()));
}

/// A little-endian base-128 varint of `bytes` at *pos; false when it runs past the end.
bool table_varint(std::string_view bytes, size_t* pos, uint64_t* out) {
  *out = 0;
  for (int shift = 0; shift < 64 && *pos < bytes.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(bytes[(*pos)++]);
    *out |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

/// Checks, before LevelDB reads the table, every size it would allocate by: LevelDB allocates
/// a block's bytes as its handle says before reading them, and a snappy block's uncompressed
/// size as its header says, so a corrupt handle would ask for gigabytes. Verified here against
/// the file: the footer's index handle, each data block handle in the index block, and each
/// compressed block's uncompressed size against what snappy can expand to.
void check_table_sizes(const fs::path& file, std::string_view bytes) {
  const std::string where = file.string();
  auto fail = [&](const std::string& what) {
    throw DataError(
        fmt::format("{}: the checkpoint index (a LevelDB table) is corrupt: {}", where, what));
  };
  const uint64_t body = bytes.size() - kTableFooterBytes;  // is_tf_checkpoint_index checked
  constexpr uint64_t kTrailer = 5;                         // type byte + crc32c
  // A block of `size` bytes at `offset`, and its bytes once uncompressed.
  auto block = [&](uint64_t offset, uint64_t size, const std::string& what) {
    if (offset > body || size > body - offset || body - offset - size < kTrailer) {
      fail(fmt::format("{} of {} bytes at byte {} runs past the end of the {}-byte file", what,
                       size, offset, bytes.size()));
    }
    const std::string_view raw = bytes.substr(offset, size);
    const auto type = static_cast<uint8_t>(bytes[offset + size]);
    if (type == 0) return std::string(raw);
    if (type != 1) fail(fmt::format("{} has compression type {} (0 none, 1 snappy)", what, type));
    size_t expanded = 0;
    // Snappy emits at most 64 bytes per 2-byte copy element: 32x bounds any valid stream.
    if (!snappy::GetUncompressedLength(raw.data(), raw.size(), &expanded) ||
        expanded > 32 * raw.size() + 64) {
      fail(fmt::format("{}'s snappy header claims {} bytes from {}", what, expanded, raw.size()));
    }
    std::string out;
    if (!snappy::Uncompress(raw.data(), raw.size(), &out)) fail(what + " is not valid snappy");
    return out;
  };
  size_t pos = body;
  uint64_t meta_offset = 0, meta_size = 0, index_offset = 0, index_size = 0;
  const std::string_view footer = bytes.substr(0, body + 40);
  if (!table_varint(footer, &pos, &meta_offset) || !table_varint(footer, &pos, &meta_size) ||
      !table_varint(footer, &pos, &index_offset) || !table_varint(footer, &pos, &index_size)) {
    fail("its footer's block handles are not varints");
  }
  block(meta_offset, meta_size, "the metaindex block");
  const std::string index = block(index_offset, index_size, "the index block");
  // A block: entries (shared, unshared, value lengths, key delta, value), then the restart
  // offsets (uint32 each) and their count (uint32).
  if (index.size() < 4) fail("the index block has no restart count");
  uint32_t restarts = 0;
  std::memcpy(&restarts, index.data() + index.size() - 4, 4);
  if (restarts > (index.size() - 4) / 4)
    fail(fmt::format("the index block claims {} restarts", restarts));
  const std::string_view entries(index.data(), index.size() - 4 - 4 * uint64_t{restarts});
  for (size_t at = 0; at < entries.size();) {
    uint64_t shared = 0, unshared = 0, value_size = 0;
    if (!table_varint(entries, &at, &shared) || !table_varint(entries, &at, &unshared) ||
        !table_varint(entries, &at, &value_size) || unshared > entries.size() - at ||
        value_size > entries.size() - at - unshared) {
      fail(fmt::format("the index block's entry at byte {} runs past the block", at));
    }
    at += unshared;
    size_t v = 0;
    const std::string_view value = entries.substr(at, value_size);
    uint64_t offset = 0, size = 0;
    if (!table_varint(value, &v, &offset) || !table_varint(value, &v, &size)) {
      fail("an index entry is not a block handle");
    }
    block(offset, size, fmt::format("the data block at byte {}", offset));
    at += value_size;
  }
}

/// Every key and value of the table `file`, in key order, block checksums verified.
Records read_table(const fs::path& file) {
  leveldb::Env* env = leveldb::Env::Default();
  uint64_t size = 0;
  leveldb::Status s = env->GetFileSize(file.string(), &size);
  if (!s.ok()) throw_leveldb(file, "sizing", s);
  // Checked here for a clearer message than LevelDB's "not an sstable (bad magic number)".
  BERTLAB_CHECK_AS(DataError, is_tf_checkpoint_index(file),
                   "{}: not a TensorFlow checkpoint index: {} bytes, and its last 8 bytes are not "
                   "the LevelDB table magic number; the file is truncated or is something else",
                   file.string(), size);
  {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    BERTLAB_CHECK_AS(DataError, bytes.size() == size, "{}: cannot read it", file.string());
    check_table_sizes(file, bytes);
  }
  leveldb::RandomAccessFile* raw_file = nullptr;
  s = env->NewRandomAccessFile(file.string(), &raw_file);
  if (!s.ok()) throw_leveldb(file, "opening", s);
  // Declared in this order so the iterator goes first, then the table, then the file.
  std::unique_ptr<leveldb::RandomAccessFile> file_holder(raw_file);
  leveldb::Options options;
  options.paranoid_checks = true;
  leveldb::Table* raw_table = nullptr;
  s = leveldb::Table::Open(options, file_holder.get(), size, &raw_table);
  if (!s.ok()) throw_leveldb(file, "opening", s);
  std::unique_ptr<leveldb::Table> table(raw_table);
  leveldb::ReadOptions read_options;
  read_options.verify_checksums = true;
  read_options.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(table->NewIterator(read_options));
  Records records;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    records.emplace_back(it->key().ToString(), it->value().ToString());
  }
  if (!it->status().ok()) throw_leveldb(file, "reading", it->status());
  return records;
}

struct Index {
  int32_t num_shards = 0;
  std::vector<TfTensorInfo> tensors;
};

Index read_index(const fs::path& file) {
  const std::string where = file.string();
  const Records records = read_table(file);
  // The header is the record with the empty key, which sorts first (tensor_bundle.h
  // kHeaderEntryKey).
  BERTLAB_CHECK_AS(DataError, !records.empty() && records.front().first.empty(),
                   "{}: the checkpoint index has no header record (the empty key); it is not a "
                   "TensorFlow tensor bundle",
                   where);
  const BundleHeader header =
      parse_header(records.front().second, where + ": header BundleHeaderProto");
  BERTLAB_CHECK_AS(DataError, header.endianness == 0,
                   "{}: the checkpoint is {} (endianness {}); only little-endian checkpoints are "
                   "supported: re-save it on a little-endian machine",
                   where, header.endianness == 1 ? "big-endian" : "of unknown byte order",
                   header.endianness);
  Index index;
  index.num_shards = header.num_shards;
  BERTLAB_CHECK_AS(DataError, index.num_shards >= 1 || records.size() == 1,
                   "{}: the header says {} data shards but the index lists {} tensors", where,
                   index.num_shards, records.size() - 1);
  for (size_t i = 1; i < records.size(); ++i) {
    const auto& [name, value] = records[i];
    const BundleEntry entry =
        parse_entry(value, fmt::format("{}: tensor '{}': BundleEntryProto", where, name));
    index.tensors.push_back(validate_entry(name, entry, index.num_shards, where));
  }
  return index;
}

// ---------------------------------------------------------------------------------------------
// Data shards.

/// One data shard opened for positional reads.
class ShardFile {
 public:
  ShardFile(fs::path path, const fs::path& index) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    BERTLAB_CHECK_AS(DataError, fd_ >= 0, "{}: cannot open this data shard of checkpoint {}: {}",
                     path_.string(), index.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      ::close(fd_);
      throw DataError(fmt::format("{}: cannot stat: {}", path_.string(), std::strerror(err)));
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~ShardFile() { ::close(fd_); }
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  const fs::path& path() const { return path_; }
  uint64_t size() const { return size_; }

  /// Reads `n` bytes at `offset` into `out`; the caller has checked them against size().
  void read(uint64_t offset, uint64_t n, void* out, const std::string& tensor) const {
    auto* dst = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw DataError(fmt::format("{}: tensor '{}': read failed at byte {}: {}", path_.string(),
                                    tensor, offset,
                                    got == 0 ? "unexpected end of file" : std::strerror(errno)));
      }
      dst += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
  }

 private:
  fs::path path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// `prefix.data-SSSSS-of-NNNNN`, as tensor_bundle.cc's DataFilename.
fs::path shard_path(const std::string& prefix, int32_t shard, int32_t num_shards) {
  return fs::path(fmt::format("{}.data-{:05d}-of-{:05d}", prefix, shard, num_shards));
}

at::Tensor read_tensor(const TfTensorInfo& info, const ShardFile& shard) {
  BERTLAB_CHECK_AS(
      DataError, info.offset <= shard.size() && info.size <= shard.size() - info.offset,
      "{}: tensor '{}': bytes [{}, {}) run past the end of the file ({} bytes); the "
      "data shard is truncated",
      shard.path().string(), info.name, info.offset, info.offset + info.size, shard.size());
  at::Tensor t = at::empty(info.shape, at::TensorOptions().dtype(info.dtype));
  if (info.size > 0) shard.read(info.offset, info.size, t.data_ptr(), info.name);
  const uint32_t computed = crc32c(t.data_ptr(), info.size);
  BERTLAB_CHECK_AS(DataError, computed == info.crc32c,
                   "{}: tensor '{}': CRC-32C mismatch (stored 0x{:08x}, computed 0x{:08x}); the "
                   "data shard is corrupt",
                   shard.path().string(), info.name, info.crc32c, computed);
  return t;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

/// The prefix of a data shard name `PREFIX.data-SSSSS-of-NNNNN`, or empty when `s` is not one.
std::string shard_prefix(std::string_view s) {
  const size_t data = s.rfind(".data-");
  if (data == std::string_view::npos || data == 0) return {};
  const std::string_view rest = s.substr(data + 6);
  const size_t of = rest.find("-of-");
  if (of == std::string_view::npos) return {};
  if (!all_digits(rest.substr(0, of)) || !all_digits(rest.substr(of + 4))) return {};
  return std::string(s.substr(0, data));
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

fs::path tf_checkpoint_index_path(const fs::path& path) {
  const std::string s = path.string();
  constexpr const char* kHow =
      "name a TensorFlow checkpoint by its prefix (e.g. .../bert_model.ckpt), its .index file or "
      "one of its .data-NNNNN-of-NNNNN shards";
  if (ends_with(s, ".index")) {
    BERTLAB_CHECK_AS(DataError, is_file(path), "{}: no such checkpoint index file; {}", s, kHow);
    return path;
  }
  if (const std::string prefix = shard_prefix(s); !prefix.empty()) {
    fs::path index = prefix + ".index";
    BERTLAB_CHECK_AS(DataError, is_file(index),
                     "{}: a checkpoint data shard, but its index {} does not exist; {}", s,
                     index.string(), kHow);
    return index;
  }
  fs::path index = s + ".index";
  if (is_file(index)) return index;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw DataError(
        fmt::format("{}: is a folder, not a TensorFlow checkpoint (looked for {}); {}, e.g. {}", s,
                    index.string(), kHow, (path / "bert_model.ckpt").string()));
  }
  throw DataError(
      fmt::format("{}: no TensorFlow checkpoint: looked for {}; {}", s, index.string(), kHow));
}

bool is_tf_checkpoint_index(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            static_cast<uint64_t>(st.st_size) >= kTableFooterBytes;
  uint8_t tail[8] = {};
  ok = ok && ::pread(fd, tail, sizeof(tail), st.st_size - 8) == static_cast<ssize_t>(sizeof(tail));
  ::close(fd);
  if (!ok) return false;
  uint64_t magic = 0;
  for (int i = 7; i >= 0; --i) magic = (magic << 8) | tail[i];
  return magic == kTableMagic;
}

std::vector<TfTensorInfo> read_tf_checkpoint_index(const fs::path& path) {
  return read_index(tf_checkpoint_index_path(path)).tensors;
}

NamedTensors read_tf_checkpoint(const fs::path& path) {
  const fs::path index_file = tf_checkpoint_index_path(path);
  const Index index = read_index(index_file);
  std::string prefix = index_file.string();
  prefix.resize(prefix.size() - std::string_view(".index").size());
  // Opened on first use, so a checkpoint of only scalars in shard 0 needs no other shard.
  std::vector<std::unique_ptr<ShardFile>> shards(static_cast<size_t>(index.num_shards));
  NamedTensors out;
  out.reserve(index.tensors.size());
  for (const TfTensorInfo& info : index.tensors) {
    auto& shard = shards[static_cast<size_t>(info.shard)];
    if (!shard) {
      shard =
          std::make_unique<ShardFile>(shard_path(prefix, info.shard, index.num_shards), index_file);
    }
    out.emplace_back(info.name, read_tensor(info, *shard));
  }
  return out;
}

}  // namespace bertlab
