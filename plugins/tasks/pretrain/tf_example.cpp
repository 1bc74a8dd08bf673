// tf.train.Example protobuf encoding by hand (example.proto, feature.proto); the TFRecord framing
// is the SDK's (bertlab/io/tfrecord.h).

#include "tf_example.h"

#include <bertlab/error.h>
#include <bertlab/io/crc32c.h>
#include <bertlab/io/protobuf_wire.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace bertlab::pretrain {

namespace fs = std::filesystem;

namespace {

using protobuf::kFixed32;
using protobuf::kLengthDelimited;
using protobuf::kVarint;
using protobuf::put_bytes;
using protobuf::put_float_bytes;
using protobuf::put_tag;
using protobuf::put_varint;

// Feature { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
// Int64List int64_list = 3; } }, each list { repeated T value = 1 [packed = true]; }.
std::string serialize_feature(const FeatureValues& values) {
  std::string packed;
  uint32_t kind = 0;
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&values)) {
    kind = 3;
    for (const int64_t v : *ints) put_varint(packed, static_cast<uint64_t>(v));
  } else {
    kind = 2;
    for (const float v : std::get<std::vector<float>>(values)) put_float_bytes(packed, v);
  }
  std::string list;
  if (!packed.empty()) put_bytes(list, 1, packed);
  std::string feature;
  put_bytes(feature, kind, list);
  return feature;
}

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& what) : p_(bytes), what_(what) {}
  bool done() const { return p_.empty(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_.empty()) fail("a varint runs past the end");
      const auto byte = static_cast<uint8_t>(p_.front());
      p_.remove_prefix(1);
      v |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    fail("a varint is longer than 10 bytes");
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > p_.size()) fail("a field runs past the end");
    const auto out = p_.substr(0, n);
    p_.remove_prefix(n);
    return out;
  }
  float fixed32_float() {
    if (p_.size() < 4) fail("a float runs past the end");
    float v = 0;
    std::memcpy(&v, p_.data(), 4);
    p_.remove_prefix(4);
    return v;
  }
  void skip(uint32_t wire) {
    if (wire == kVarint) {
      varint();
    } else if (wire == kLengthDelimited) {
      bytes();
    } else if (wire == kFixed32 && p_.size() >= 4) {
      p_.remove_prefix(4);
    } else if (wire == 1 && p_.size() >= 8) {
      p_.remove_prefix(8);
    } else {
      fail(fmt::format("wire type {} cannot be skipped", wire));
    }
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw DataError(fmt::format("{}: not a tf.train.Example: {}", what_, why));
  }

 private:
  std::string_view p_;
  const std::string& what_;
};

FeatureValues parse_feature(std::string_view bytes, const std::string& what) {
  Reader feature(bytes, what);
  FeatureValues out = std::vector<int64_t>{};
  while (!feature.done()) {
    const uint64_t tag = feature.varint();
    const auto field = static_cast<uint32_t>(tag >> 3);
    const auto wire = static_cast<uint32_t>(tag & 7);
    if (field == 1) feature.fail("bytes features are not used by BERT pretraining");
    if ((field != 2 && field != 3) || wire != kLengthDelimited) {
      feature.skip(wire);
      continue;
    }
    Reader list(feature.bytes(), what);
    std::vector<int64_t> ints;
    std::vector<float> floats;
    while (!list.done()) {
      const uint64_t list_tag = list.varint();
      const auto list_wire = static_cast<uint32_t>(list_tag & 7);
      const bool value = (list_tag >> 3) == 1;       // field 1, the values; others are skipped
      if (value && list_wire == kLengthDelimited) {  // packed values
        Reader packed(list.bytes(), what);
        while (!packed.done()) {
          if (field == 3) {
            ints.push_back(static_cast<int64_t>(packed.varint()));
          } else {
            floats.push_back(packed.fixed32_float());
          }
        }
      } else if (value && field == 3 && list_wire == kVarint) {
        ints.push_back(static_cast<int64_t>(list.varint()));
      } else if (value && field == 2 && list_wire == kFixed32) {
        floats.push_back(list.fixed32_float());
      } else {
        list.skip(list_wire);
      }
    }
    if (field == 3) {
      out = std::move(ints);
    } else {
      out = std::move(floats);
    }
  }
  return out;
}

}  // namespace

std::string serialize_example(const ExampleFeatures& features) {
  // Example { Features features = 1; }  Features { map<string, Feature> feature = 1; }
  std::string map;
  for (const auto& [name, values] : features) {
    std::string entry;
    put_bytes(entry, 1, name);
    put_bytes(entry, 2, serialize_feature(values));
    put_bytes(map, 1, entry);
  }
  std::string example;
  put_bytes(example, 1, map);
  return example;
}

ExampleFeatures parse_example(std::string_view bytes, const std::string& what) {
  ExampleFeatures out;
  Reader example(bytes, what);
  while (!example.done()) {
    const uint64_t tag = example.varint();
    if ((tag >> 3) != 1 || (tag & 7) != kLengthDelimited) {
      example.skip(static_cast<uint32_t>(tag & 7));
      continue;
    }
    Reader map(example.bytes(), what);
    while (!map.done()) {
      const uint64_t map_tag = map.varint();
      if ((map_tag >> 3) != 1 || (map_tag & 7) != kLengthDelimited) {
        map.skip(static_cast<uint32_t>(map_tag & 7));
        continue;
      }
      Reader entry(map.bytes(), what);
      std::string name;
      FeatureValues values = std::vector<int64_t>{};
      while (!entry.done()) {
        const uint64_t entry_tag = entry.varint();
        const auto field = entry_tag >> 3;
        if ((entry_tag & 7) != kLengthDelimited) {
          entry.skip(static_cast<uint32_t>(entry_tag & 7));
        } else if (field == 1) {
          name = std::string(entry.bytes());
        } else if (field == 2) {
          values = parse_feature(entry.bytes(), what);
        } else {
          entry.bytes();
        }
      }
      out.emplace_back(std::move(name), std::move(values));
    }
  }
  return out;
}

ExampleFeatures to_example(const InstanceFeatures& f) {
  return {{"input_ids", f.input_ids},
          {"input_mask", f.input_mask},
          {"segment_ids", f.segment_ids},
          {"masked_lm_positions", f.masked_lm_positions},
          {"masked_lm_ids", f.masked_lm_ids},
          {"masked_lm_weights", f.masked_lm_weights},
          {"next_sentence_labels", f.next_sentence_labels}};
}

namespace {

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

/// Appends the varints of `count` values then `zeros` zero bytes (padding: a zero is one byte).
void put_varints(std::string& out, const int32_t* values, size_t count, size_t zeros) {
  const size_t start = out.size();
  out.resize(start + 10 * count + zeros);  // the zeros are in place already
  auto* p = reinterpret_cast<uint8_t*>(out.data() + start);
  for (size_t i = 0; i < count; ++i) {
    // int64 features: a negative value is its 10-byte two's complement, as protobuf writes it.
    auto v = static_cast<uint64_t>(static_cast<int64_t>(values[i]));
    while (v >= 0x80) {
      *p++ = static_cast<uint8_t>(v | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<uint8_t>(v);
  }
  std::memset(p, 0, zeros);
  out.resize(static_cast<size_t>(reinterpret_cast<char*>(p) - out.data()) + zeros);
}

void put_repeated_byte(std::string& out, char byte, size_t count) { out.append(count, byte); }

}  // namespace

void append_instance_record(std::string& out, const InstanceView& v, int64_t max_seq_length,
                            int64_t max_predictions_per_seq) {
  const auto [seq, predictions, masked] = padded_shape(v, max_seq_length, max_predictions_per_seq);
  // The packed values of the seven features one after the other, then the Example around them.
  thread_local std::string packed;
  packed.clear();
  size_t ends[7];
  put_varints(packed, v.tokens, v.length, seq - v.length);
  ends[0] = packed.size();
  put_repeated_byte(packed, 1, v.length);
  put_repeated_byte(packed, 0, seq - v.length);
  ends[1] = packed.size();
  put_repeated_byte(packed, 0, v.segment_a_length);
  put_repeated_byte(packed, 1, v.length - v.segment_a_length);
  put_repeated_byte(packed, 0, seq - v.length);
  ends[2] = packed.size();
  put_varints(packed, v.masked_positions, masked, predictions - masked);
  ends[3] = packed.size();
  put_varints(packed, v.masked_labels, masked, predictions - masked);
  ends[4] = packed.size();
  for (size_t i = 0; i < predictions; ++i) put_float_bytes(packed, i < masked ? 1.0F : 0.0F);
  ends[5] = packed.size();
  put_varint(packed, v.is_random_next ? 1 : 0);
  ends[6] = packed.size();
  static constexpr std::string_view kNames[7] = {
      "input_ids",     "input_mask",        "segment_ids",         "masked_lm_positions",
      "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"};
  // Feature kinds: Int64List = 3, FloatList = 2.
  static constexpr uint32_t kKinds[7] = {3, 3, 3, 3, 3, 2, 3};
  // Sizes from the inside out: list { packed }, feature { list }, entry { name, feature }.
  size_t entry_sizes[7];
  size_t feature_sizes[7];
  size_t list_sizes[7];
  size_t map_size = 0;
  for (size_t f = 0; f < 7; ++f) {
    const size_t n = ends[f] - (f == 0 ? 0 : ends[f - 1]);
    list_sizes[f] = n == 0 ? 0 : 1 + varint_size(n) + n;
    feature_sizes[f] = 1 + varint_size(list_sizes[f]) + list_sizes[f];
    entry_sizes[f] = 1 + varint_size(kNames[f].size()) + kNames[f].size() + 1 +
                     varint_size(feature_sizes[f]) + feature_sizes[f];
    map_size += 1 + varint_size(entry_sizes[f]) + entry_sizes[f];
  }
  thread_local std::string example;
  example.clear();
  put_tag(example, 1, kLengthDelimited);
  put_varint(example, map_size);
  for (size_t f = 0; f < 7; ++f) {
    const size_t begin = f == 0 ? 0 : ends[f - 1];
    const size_t n = ends[f] - begin;
    put_tag(example, 1, kLengthDelimited);
    put_varint(example, entry_sizes[f]);
    put_bytes(example, 1, kNames[f]);
    put_tag(example, 2, kLengthDelimited);
    put_varint(example, feature_sizes[f]);
    put_tag(example, kKinds[f], kLengthDelimited);
    put_varint(example, list_sizes[f]);
    if (n > 0) put_bytes(example, 1, std::string_view(packed).substr(begin, n));
  }
  append_tfrecord(out, example);
}

}  // namespace bertlab::pretrain
