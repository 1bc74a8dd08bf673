#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/torch_checkpoint.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>

#include "io/pickle_reader.h"

namespace bertlab {

namespace fs = std::filesystem;

namespace {

constexpr char kZipMagic[] = "PK\x03\x04";
/// The first byte of a pickle of protocol >= 2 (PROTO), which is how a legacy (torch < 1.6)
/// torch.save file starts: pickles of a magic number, the protocol version, ..., the storages.
constexpr unsigned char kPickleProto = 0x80;

/// The first `n` bytes of `path` (fewer if it is shorter).
std::string read_head(const fs::path& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  BERTLAB_CHECK_AS(DataError, in.is_open(), "{}: cannot open: {}", path.string(),
                   std::strerror(errno));
  std::string head(n, '\0');
  in.read(head.data(), static_cast<std::streamsize>(n));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

/// The first line of a c10::Error's message (without the C++ backtrace).
std::string first_line(const c10::Error& e) {
  std::string message = e.what_without_backtrace();
  const size_t end = message.find('\n');
  if (end != std::string::npos) message.resize(end);
  return message;
}

/// Runs `f` on the zip reader, rethrowing its errors (c10::Error, and std::bad_alloc for a
/// record that claims an impossible size) as DataError naming the file.
template <typename F>
auto zip_call(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    throw DataError(
        fmt::format("{}: not a readable torch.save zip archive (truncated or corrupt?): {}", where,
                    first_line(e)));
  } catch (const std::bad_alloc&) {
    throw DataError(fmt::format(
        "{}: not a readable torch.save zip archive: a record claims more bytes than can be "
        "allocated (corrupt?)",
        where));
  }
}

uint64_t le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// Refuses an archive whose central directory claims a record larger than the file: torch.save
/// stores records uncompressed, and the zip reader allocates a record's claimed size before it
/// reads a byte. Reads only the end-of-central-directory record(s) and the directory itself.
void check_record_sizes(const fs::path& path, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  auto read_at = [&](uint64_t offset, uint64_t n) {
    std::string out(n, '\0');
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(out.data(), static_cast<std::streamsize>(n));
    out.resize(static_cast<size_t>(in.gcount()));
    in.clear();
    return out;
  };
  auto corrupt = [&](const std::string& what) {
    return DataError(fmt::format(
        "{}: not a readable torch.save zip archive (truncated or corrupt?): {}", where, what));
  };
  // The end-of-central-directory record: 22 bytes plus a comment of up to 65535.
  const uint64_t tail_size = std::min<uint64_t>(file_size, 22 + 65535);
  const std::string tail = read_at(file_size - tail_size, tail_size);
  const auto* t = reinterpret_cast<const unsigned char*>(tail.data());
  size_t eocd = std::string::npos;
  for (size_t i = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; i-- > 0;) {
    if (le(t + i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos) throw corrupt("no end-of-central-directory record");
  uint64_t entries = le(t + eocd + 10, 2), dir_size = le(t + eocd + 12, 4),
           dir_offset = le(t + eocd + 16, 4);
  if (entries == 0xffff || dir_size == 0xffffffff || dir_offset == 0xffffffff) {
    // Zip64: the locator (20 bytes) before the record points at the zip64 record.
    const uint64_t eocd_at = file_size - tail_size + eocd;
    if (eocd_at < 20) throw corrupt("a zip64 archive without its locator");
    const std::string locator = read_at(eocd_at - 20, 20);
    const auto* l = reinterpret_cast<const unsigned char*>(locator.data());
    if (locator.size() != 20 || le(l, 4) != 0x07064b50) throw corrupt("no zip64 locator");
    const std::string record = read_at(le(l + 8, 8), 56);
    const auto* r = reinterpret_cast<const unsigned char*>(record.data());
    if (record.size() != 56 || le(r, 4) != 0x06064b50) throw corrupt("no zip64 directory record");
    entries = le(r + 32, 8);
    dir_size = le(r + 40, 8);
    dir_offset = le(r + 48, 8);
  }
  if (dir_offset > file_size || dir_size > file_size - dir_offset) {
    throw corrupt(
        fmt::format("its central directory ({} bytes at byte {}) runs past the end of "
                    "the {}-byte file",
                    dir_size, dir_offset, file_size));
  }
  const std::string dir = read_at(dir_offset, dir_size);
  const auto* d = reinterpret_cast<const unsigned char*>(dir.data());
  size_t at = 0;
  for (uint64_t e = 0; e < entries && at + 46 <= dir.size(); ++e) {
    if (le(d + at, 4) != 0x02014b50) break;  // the zip reader reports a broken directory
    uint64_t size = le(d + at + 24, 4);
    const size_t name_len = le(d + at + 28, 2), extra_len = le(d + at + 30, 2),
                 comment_len = le(d + at + 32, 2);
    if (at + 46 + name_len + extra_len > dir.size()) break;
    const std::string name(dir.data() + at + 46, name_len);
    if (size == 0xffffffff) {
      // The zip64 extra field (id 1) starts with the uncompressed size.
      for (size_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
        const uint64_t id = le(d + x, 2), len = le(d + x + 2, 2);
        if (id == 1 && len >= 8 && x + 12 <= dir.size()) size = le(d + x + 4, 8);
        x += 4 + len;
      }
    }
    if (size > file_size) {
      throw corrupt(fmt::format("record {} claims {} bytes, more than the whole file ({} bytes)",
                                name, size, file_size));
    }
    at += 46 + name_len + extra_len + comment_len;
  }
}

/// A whole record, as a 1-D uint8 CPU tensor that owns the reader's buffer.
at::Tensor record_tensor(caffe2::serialize::PyTorchStreamReader& reader, const std::string& name) {
  auto [data, size] = reader.getRecord(name);
  if (size == 0) return at::empty({0}, at::TensorOptions().dtype(at::kByte));
  auto owner = std::make_shared<at::DataPtr>(std::move(data));
  return at::from_blob(
      owner->get(), {static_cast<int64_t>(size)}, [owner](void*) mutable { owner.reset(); },
      at::TensorOptions().dtype(at::kByte));
}

std::string record_list(caffe2::serialize::PyTorchStreamReader& reader) {
  std::vector<std::string> names = reader.getAllRecords();
  constexpr size_t kShown = 8;
  const size_t total = names.size();
  if (names.size() > kShown) names.resize(kShown);
  return fmt::format("{}{}", fmt::join(names, ", "), total > kShown ? ", ..." : "");
}

}  // namespace

bool is_zip_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  in.read(magic, sizeof(magic));
  return in.gcount() == sizeof(magic) && std::memcmp(magic, kZipMagic, sizeof(magic)) == 0;
}

NamedTensors read_torch_checkpoint(const fs::path& path) {
  const std::string where = path.string();
  const std::string head = read_head(path, 4);
  if (head != std::string(kZipMagic, 4)) {
    if (!head.empty() && static_cast<unsigned char>(head[0]) == kPickleProto) {
      throw DataError(fmt::format(
          "{}: legacy (non-zip) torch.save format, as torch < 1.6 wrote it; re-save it with "
          "torch >= 1.6 (`torch.save(sd, f)`) or convert it to safetensors",
          where));
    }
    throw DataError(fmt::format(
        "{}: not a torch.save checkpoint: it does not start as a zip archive (PK\\x03\\x04)",
        where));
  }
  // Records are named relative to the archive's top folder (archive/data.pkl is "data.pkl").
  check_record_sizes(path, where);
  auto reader = zip_call(
      where, [&] { return std::make_unique<caffe2::serialize::PyTorchStreamReader>(where); });
  if (!zip_call(where, [&] { return reader->hasRecord("data.pkl"); })) {
    throw DataError(
        fmt::format("{}: the zip archive has no data.pkl record, so it is not a torch.save "
                    "checkpoint (records: {})",
                    where, zip_call(where, [&] { return record_list(*reader); })));
  }
  // Written by torch >= 2.0; older files are little-endian, as the storages are read here.
  if (zip_call(where, [&] { return reader->hasRecord("byteorder"); })) {
    const at::Tensor order = zip_call(where, [&] { return record_tensor(*reader, "byteorder"); });
    const std::string value(static_cast<const char*>(order.data_ptr()),
                            static_cast<size_t>(order.numel()));
    BERTLAB_CHECK_AS(DataError, value == "little",
                     "{}: the storages are stored '{}'-endian (record byteorder); bertlab reads "
                     "little-endian checkpoints only: re-save it on a little-endian machine",
                     where, value.substr(0, 16));
  }
  const at::Tensor pickle = zip_call(where, [&] { return record_tensor(*reader, "data.pkl"); });
  const StorageRecordLoader load_record = [&](const std::string& key) {
    const std::string name = "data/" + key;
    if (!zip_call(where, [&] { return reader->hasRecord(name); })) {
      throw DataError(fmt::format(
          "{}: data.pkl refers to the storage record {}, which the archive lacks (truncated or "
          "corrupt?)",
          where, name));
    }
    return zip_call(where, [&] { return record_tensor(*reader, name); });
  };
  const std::string_view bytes(static_cast<const char*>(pickle.data_ptr()),
                               static_cast<size_t>(pickle.numel()));
  try {
    return unpickle_state_dict(bytes, load_record, where + ": data.pkl");
  } catch (const c10::Error& e) {
    throw DataError(fmt::format("{}: data.pkl: {}", where, first_line(e)));
  }
}

}  // namespace bertlab
