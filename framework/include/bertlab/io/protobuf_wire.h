#pragma once
// The protobuf wire format, written by hand for the few messages bertlab writes (TensorBoard's
// Event and Summary, tf.train.Example): varints, tags, length-delimited and fixed-width fields.

#include <cstdint>
#include <string>
#include <string_view>

namespace bertlab::protobuf {

// Wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

/// Appends `v` as a base-128 varint.
void put_varint(std::string& out, uint64_t v);
/// Appends the key of field `field` with wire type `wire`.
void put_tag(std::string& out, uint32_t field, uint32_t wire);
/// Appends a length-delimited field (bytes, a string, an embedded message, a packed list).
void put_bytes(std::string& out, uint32_t field, std::string_view bytes);
/// Appends a double field (fixed64, little-endian).
void put_double(std::string& out, uint32_t field, double v);
/// Appends a float field (fixed32, little-endian).
void put_float(std::string& out, uint32_t field, float v);
/// Appends the 4 little-endian bytes of `v` without a tag (an element of a packed float list).
void put_float_bytes(std::string& out, float v);

}  // namespace bertlab::protobuf
