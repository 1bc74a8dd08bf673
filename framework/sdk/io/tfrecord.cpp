// TFRecord framing (length, masked CRC-32C of it, data, masked CRC-32C of it), its writer and its
// reader; the writer puts its file in place through AtomicFile (bertlab/io/atomic_file.h).

#include <bertlab/error.h>
#include <bertlab/io/crc32c.h>
#include <bertlab/io/tfrecord.h>
#include <fmt/format.h>

#include <cstring>

namespace bertlab {

namespace fs = std::filesystem;

std::string frame_tfrecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  append_tfrecord(out, data);
  return out;
}

void append_tfrecord(std::string& out, std::string_view data) {
  char header[12];
  const uint64_t length = data.size();
  std::memcpy(header, &length, 8);
  const uint32_t length_crc = crc32c_mask(crc32c(header, 8));
  std::memcpy(header + 8, &length_crc, 4);
  out.append(header, 12);
  out.append(data);
  const uint32_t data_crc = crc32c_mask(crc32c(data.data(), data.size()));
  out.append(reinterpret_cast<const char*>(&data_crc), 4);
}

void TfRecordWriter::write(std::string_view record) { file_.write(frame_tfrecord(record)); }

TfRecordReader::TfRecordReader(fs::path path, uint64_t offset, int64_t index)
    : path_(std::move(path)), in_(path_, std::ios::binary), offset_(offset), index_(index) {
  if (!in_) throw DataError(fmt::format("{}: cannot read the TFRecord file", path_.string()));
  in_.seekg(0, std::ios::end);
  size_ = static_cast<uint64_t>(in_.tellg());
  if (offset_ > size_) {
    throw DataError(fmt::format("{}: offset {} is beyond the end of the file ({} bytes)",
                                path_.string(), offset_, size_));
  }
  in_.seekg(static_cast<std::streamoff>(offset_));
}

bool TfRecordReader::next(std::string* record) {
  if (offset_ == size_) return false;
  const auto fail = [&](const char* why) {
    throw DataError(
        fmt::format("{}: record {} at byte {}: {}", path_.string(), index_, offset_, why));
  };
  if (size_ - offset_ < 12) fail("truncated header");
  char header[12];
  if (!in_.read(header, 12)) fail("read failed");
  uint64_t length = 0;
  uint32_t length_crc = 0;
  std::memcpy(&length, header, 8);
  std::memcpy(&length_crc, header + 8, 4);
  if (crc32c_mask(crc32c(header, 8)) != length_crc) fail("length checksum mismatch");
  // Compared without adding to `length` (a corrupt one may be near 2^64).
  if (size_ - offset_ - 12 < 4 || length > size_ - offset_ - 16) fail("truncated record");
  if (record == nullptr) {
    in_.seekg(static_cast<std::streamoff>(length + 4), std::ios::cur);
  } else {
    record->resize(length);
    uint32_t data_crc = 0;
    if (!in_.read(record->data(), static_cast<std::streamsize>(length)) ||
        !in_.read(reinterpret_cast<char*>(&data_crc), 4)) {
      fail("read failed");
    }
    if (crc32c_mask(crc32c(record->data(), length)) != data_crc) fail("data checksum mismatch");
  }
  offset_ += 12 + length + 4;
  ++index_;
  return true;
}

std::vector<std::string> read_tfrecords(const fs::path& path) {
  TfRecordReader reader(path);
  std::vector<std::string> records;
  for (std::string record; reader.next(&record);) records.push_back(std::move(record));
  return records;
}

}  // namespace bertlab
