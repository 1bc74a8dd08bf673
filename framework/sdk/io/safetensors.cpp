#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/io/safetensors.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

/// The largest header we accept (the reference implementation's limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeName {
  at::ScalarType type;
  const char* name;
};

constexpr DtypeName kDtypes[] = {
    {at::kDouble, "F64"}, {at::kFloat, "F32"}, {at::kHalf, "F16"},  {at::kBFloat16, "BF16"},
    {at::kLong, "I64"},   {at::kInt, "I32"},   {at::kShort, "I16"}, {at::kChar, "I8"},
    {at::kByte, "U8"},    {at::kBool, "BOOL"},
};

const char* dtype_name(at::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  throw Error(fmt::format("safetensors: dtype {} cannot be stored", c10::toString(type)));
}

std::optional<at::ScalarType> dtype_of(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  return std::nullopt;
}

/// A read-only memory map of a whole file.
class MappedFile {
 public:
  explicit MappedFile(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    BERTLAB_CHECK_AS(DataError, fd_ >= 0, "{}: cannot open: {}", path.string(),
                     std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      ::close(fd_);
      throw DataError(fmt::format("{}: cannot stat: {}", path.string(), std::strerror(errno)));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      if (p == MAP_FAILED) {
        ::close(fd_);
        throw DataError(fmt::format("{}: cannot map: {}", path.string(), std::strerror(errno)));
      }
      data_ = static_cast<const uint8_t*>(p);
    }
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The header's length from the file's first 8 bytes, checked against the file's size.
uint64_t header_length(const MappedFile& file, const std::string& where) {
  BERTLAB_CHECK_AS(DataError, file.size() >= 8,
                   "{}: not a safetensors file: {} bytes, shorter than the 8-byte header length",
                   where, file.size());
  const uint64_t header_len = read_le64(file.data());
  BERTLAB_CHECK_AS(DataError, header_len <= kMaxHeaderBytes && header_len <= file.size() - 8,
                   "{}: header length {} does not fit the file ({} bytes) or exceeds {} bytes",
                   where, header_len, file.size(), kMaxHeaderBytes);
  return header_len;
}

// The JSON header, which must be an object; ordered, so the tensors come back in the order the
// header lists them.
nlohmann::ordered_json parse_header(const MappedFile& file, uint64_t header_len,
                                    const std::string& where) {
  const auto* header_begin = reinterpret_cast<const char*>(file.data() + 8);
  BERTLAB_CHECK_AS(DataError, header_len > 0 && header_begin[0] == '{',
                   "{}: the header is not a JSON object", where);
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(header_begin, header_begin + header_len);
  } catch (const std::exception& e) {
    throw DataError(fmt::format("{}: the header is not valid JSON: {}", where, e.what()));
  }
  BERTLAB_CHECK_AS(DataError, header.is_object(), "{}: the header is not a JSON object", where);
  return header;
}

// Checks the header's __metadata__ and copies it into `metadata` (when not null).
void read_metadata(const nlohmann::ordered_json& info, const std::string& where,
                   std::map<std::string, std::string>* metadata) {
  BERTLAB_CHECK_AS(DataError, info.is_object(), "{}: __metadata__ is not an object", where);
  for (const auto& [k, v] : info.items()) {
    BERTLAB_CHECK_AS(DataError, v.is_string(), "{}: __metadata__.{} is not a string", where, k);
    if (metadata != nullptr) (*metadata)[k] = v.get<std::string>();
  }
}

// One tensor as the header describes it; begin and end are offsets into the data bytes.
struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

// Checks one tensor's header entry against the dtypes we know and the `data_size` data bytes.
Entry read_entry(const std::string& where, const std::string& name,
                 const nlohmann::ordered_json& info, uint64_t data_size) {
  auto fail = [&](const std::string& what) {
    return DataError(fmt::format("{}: tensor '{}': {}", where, name, what));
  };
  if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
      !info.contains("data_offsets")) {
    throw fail("needs dtype, shape and data_offsets");
  }
  Entry e;
  e.name = name;
  if (!info["dtype"].is_string()) throw fail("dtype is not a string");
  auto type = dtype_of(info["dtype"].get<std::string>());
  if (!type) throw fail(fmt::format("unsupported dtype {}", info["dtype"].dump()));
  e.type = *type;
  if (!info["shape"].is_array()) throw fail("shape is not an array");
  uint64_t numel = 1;
  for (const auto& d : info["shape"]) {
    if (!d.is_number_unsigned()) throw fail("shape has a non-integer or negative dimension");
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && numel > (uint64_t{1} << 62) / dim) throw fail("shape is too large");
    numel *= dim;
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  const auto& off = info["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned()) {
    throw fail("data_offsets must be [begin, end] with non-negative integers");
  }
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size) {
    throw fail(fmt::format("data_offsets [{}, {}] fall outside the {} data bytes", e.begin, e.end,
                           data_size));
  }
  const uint64_t expected = numel * static_cast<uint64_t>(c10::elementSize(e.type));
  if (e.end - e.begin != expected) {
    throw fail(fmt::format("data_offsets cover {} bytes but dtype and shape need {}",
                           e.end - e.begin, expected));
  }
  return e;
}

// Every data byte belongs to exactly one tensor: sorted by offset, each starts where the
// previous ended, and the last ends at the end of the file.
void check_coverage(const std::vector<Entry>& entries, uint64_t data_size,
                    const std::string& where) {
  std::vector<const Entry*> by_offset;
  by_offset.reserve(entries.size());
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  uint64_t cursor = 0;
  for (const Entry* e : by_offset) {
    if (e->begin != cursor) {
      throw DataError(fmt::format(
          "{}: tensor '{}' starts at byte {} of the data, expected {} ({})", where, e->name,
          e->begin, cursor,
          e->begin < cursor ? "it overlaps the previous tensor" : "a hole precedes it"));
    }
    cursor = e->end;
  }
  if (cursor != data_size) {
    throw DataError(fmt::format("{}: {} data bytes after the last tensor belong to none", where,
                                data_size - cursor));
  }
}

}  // namespace

void write_safetensors(const fs::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> cpu;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    BERTLAB_CHECK(name != "__metadata__", "safetensors: a tensor cannot be named __metadata__");
    BERTLAB_CHECK(!header.contains(name), "safetensors: tensor {} given twice", name);
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype_name(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    cpu.push_back(std::move(t));
  }
  std::string json = header.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += json;
  for (const auto& t : cpu) {
    out.append(static_cast<const char*>(t.data_ptr()),
               static_cast<size_t>(t.numel()) * t.element_size());
  }
  write_file_atomic(path, out);
}

NamedTensors read_safetensors(const fs::path& path, std::map<std::string, std::string>* metadata) {
  const std::string where = path.string();
  MappedFile file(path);
  const uint64_t header_len = header_length(file, where);
  const nlohmann::ordered_json header = parse_header(file, header_len, where);
  const uint64_t data_size = file.size() - 8 - header_len;
  const uint8_t* data = file.data() + 8 + header_len;
  std::vector<Entry> entries;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") {
      read_metadata(item.value(), where, metadata);
    } else {
      entries.push_back(read_entry(where, item.key(), item.value(), data_size));
    }
  }
  check_coverage(entries, data_size, where);
  NamedTensors out;
  for (const auto& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace bertlab
