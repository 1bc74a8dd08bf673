// The protobuf wire writer shared by the TensorBoard event writer and the pretrain task's
// tf.train.Example files.

#include <bertlab/io/protobuf_wire.h>

#include <cstring>

namespace bertlab::protobuf {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_tag(std::string& out, uint32_t field, uint32_t wire) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire);
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Fixed-width fields are little-endian, as on every platform bertlab builds for.
void put_double(std::string& out, uint32_t field, double v) {
  put_tag(out, field, kFixed64);
  char bytes[8];
  std::memcpy(bytes, &v, 8);
  out.append(bytes, 8);
}

void put_float_bytes(std::string& out, float v) {
  char bytes[4];
  std::memcpy(bytes, &v, 4);
  out.append(bytes, 4);
}

void put_float(std::string& out, uint32_t field, float v) {
  put_tag(out, field, kFixed32);
  put_float_bytes(out, v);
}

}  // namespace bertlab::protobuf
