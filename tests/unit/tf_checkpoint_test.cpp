// TensorFlow checkpoints and CRC-32C: the tiny-tf fixture read through every way of naming it,
// tables built here byte by byte for the cases no fixture has, and a clear DataError for each
// way a checkpoint can be damaged.

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/crc32c.h>
#include <bertlab/io/tf_checkpoint.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using namespace std::string_literals;

// ---------------------------------------------------------------------------------------------
// Helpers

/// The message of the DataError `f` throws; a test failure when it throws nothing or another type.
std::string data_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a DataError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected a DataError, nothing was thrown";
  return {};
}

/// Whether `haystack` contains `needle`, showing both when not.
::testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << needle << "\" not in \"" << haystack << "\"";
}
#define EXPECT_CONTAINS(haystack, needle) EXPECT_TRUE(contains((haystack), (needle)))

fs::path fixture_prefix() { return testing::data_path("checkpoints/tiny-tf/bert_model.ckpt"); }

/// Copies the fixture's index and data shard into `dir`, returning the copy's prefix.
fs::path copy_fixture(const TempDir& dir) {
  const fs::path src = fixture_prefix();
  for (const char* suffix : {".index", ".data-00000-of-00001"}) {
    fs::copy_file(src.string() + suffix, dir.path() / (std::string("bert_model.ckpt") + suffix));
  }
  return dir / "bert_model.ckpt";
}

std::string bytes_at(const fs::path& file, uint64_t offset, uint64_t n) {
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string out(n, '\0');
  in.read(out.data(), static_cast<std::streamsize>(n));
  EXPECT_EQ(static_cast<uint64_t>(in.gcount()), n) << file;
  return out;
}

const TfTensorInfo& find_info(const std::vector<TfTensorInfo>& index, const std::string& name) {
  for (const auto& info : index) {
    if (info.name == name) return info;
  }
  throw std::runtime_error("no tensor " + name + " in the index");
}

/// The CRC-32C of `data` one bit at a time, straight from the definition.
uint32_t crc32c_bitwise(const uint8_t* data, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t crc_of(const std::string& s) { return crc32c(s.data(), s.size()); }

// ---------------------------------------------------------------------------------------------
// CRC-32C

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  EXPECT_EQ(crc_of("a"), 0xC1D04330u);
  // RFC 3720 (iSCSI) appendix B.4.
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<char>(i);
    down[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc_of(up), 0x46DD794Eu);
  EXPECT_EQ(crc_of(down), 0x113FDB5Cu);
}

TEST(Crc32c, ExtendEqualsOneShot) {
  const std::string s = "The quick brown fox jumps over the lazy dog";
  const uint32_t whole = crc_of(s);
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    const uint32_t head = crc32c(s.data(), cut);
    EXPECT_EQ(crc32c_extend(head, s.data() + cut, s.size() - cut), whole) << cut;
  }
  EXPECT_EQ(crc32c_extend(whole, s.data(), 0), whole);
}

TEST(Crc32c, MatchesBytewiseReferenceOnAnyAlignmentAndLength) {
  std::vector<uint8_t> buf((1u << 20) + 64);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (auto& b : buf) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<uint8_t>(state >> 56);
  }
  // A 1 MiB buffer at an odd address.
  const uint8_t* odd = buf.data() + 3;
  EXPECT_EQ(crc32c(odd, 1u << 20), crc32c_bitwise(odd, 1u << 20));
  // Every start offset within 8 bytes and lengths around the 8-byte stride.
  for (size_t start = 0; start < 9; ++start) {
    for (size_t n = 0; n < 40; ++n) {
      EXPECT_EQ(crc32c(buf.data() + start, n), crc32c_bitwise(buf.data() + start, n))
          << "start " << start << " length " << n;
    }
  }
}

// crc32c() takes the CPU's instruction where there is one (x86-64 here); the tables stay the
// fallback elsewhere, so both paths are checked against the definition and each other.
TEST(Crc32c, CpuInstructionAndTablesAgree) {
#if defined(__x86_64__)
  EXPECT_TRUE(crc32c_uses_cpu_instruction()) << "an x86-64 CPU without SSE 4.2?";
#endif
  std::vector<uint8_t> buf(4096 + 16);
  uint64_t state = 12345;
  for (auto& b : buf) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<uint8_t>(state >> 56);
  }
  EXPECT_EQ(crc32c_extend_portable(0, "123456789", 9), 0xE3069283u);
  for (size_t start = 0; start < 9; ++start) {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63},
                           size_t{600}, size_t{4096}}) {
      const uint32_t seed = crc32c(buf.data(), start);
      EXPECT_EQ(crc32c_extend(seed, buf.data() + start, n),
                crc32c_extend_portable(seed, buf.data() + start, n))
          << "start " << start << " length " << n;
      EXPECT_EQ(crc32c_extend_portable(0, buf.data() + start, n),
                crc32c_bitwise(buf.data() + start, n));
    }
  }
}

TEST(Crc32c, MaskRoundTrips) {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x80000000u, 0xa282ead8u}) {
    const uint32_t masked = crc32c_mask(crc);
    EXPECT_EQ(masked, ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
    EXPECT_EQ(crc32c_unmask(masked), crc);
    EXPECT_EQ(crc32c_unmask(crc32c_unmask(crc32c_mask(masked))), crc);
    if (crc != 0xa282ead8u) {
      EXPECT_NE(masked, crc);
    }
  }
  EXPECT_EQ(crc32c_mask(0), 0xa282ead8u);
}

// ---------------------------------------------------------------------------------------------
// The tiny-tf fixture

/// The fixture's bert_config.json.
constexpr int64_t kHidden = 4;
constexpr int64_t kIntermediate = 16;
constexpr int64_t kVocab = 15;
constexpr int64_t kLayers = 2;
constexpr int64_t kPositions = 16;
constexpr int64_t kTypeVocab = 2;

/// Google BERT's run_pretraining.py variables for that config, with their Adam slots.
std::map<std::string, std::vector<int64_t>> expected_float_variables() {
  std::map<std::string, std::vector<int64_t>> trainable = {
      {"bert/embeddings/word_embeddings", {kVocab, kHidden}},
      {"bert/embeddings/token_type_embeddings", {kTypeVocab, kHidden}},
      {"bert/embeddings/position_embeddings", {kPositions, kHidden}},
      {"bert/embeddings/LayerNorm/beta", {kHidden}},
      {"bert/embeddings/LayerNorm/gamma", {kHidden}},
      {"bert/pooler/dense/kernel", {kHidden, kHidden}},
      {"bert/pooler/dense/bias", {kHidden}},
      {"cls/predictions/output_bias", {kVocab}},
      {"cls/predictions/transform/dense/kernel", {kHidden, kHidden}},
      {"cls/predictions/transform/dense/bias", {kHidden}},
      {"cls/predictions/transform/LayerNorm/beta", {kHidden}},
      {"cls/predictions/transform/LayerNorm/gamma", {kHidden}},
      {"cls/seq_relationship/output_weights", {2, kHidden}},
      {"cls/seq_relationship/output_bias", {2}},
  };
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string layer = "bert/encoder/layer_" + std::to_string(l) + "/";
    for (const char* qkv : {"query", "key", "value"}) {
      trainable[layer + "attention/self/" + qkv + "/kernel"] = {kHidden, kHidden};
      trainable[layer + "attention/self/" + qkv + "/bias"] = {kHidden};
    }
    trainable[layer + "attention/output/dense/kernel"] = {kHidden, kHidden};
    trainable[layer + "attention/output/dense/bias"] = {kHidden};
    trainable[layer + "attention/output/LayerNorm/beta"] = {kHidden};
    trainable[layer + "attention/output/LayerNorm/gamma"] = {kHidden};
    trainable[layer + "intermediate/dense/kernel"] = {kHidden, kIntermediate};
    trainable[layer + "intermediate/dense/bias"] = {kIntermediate};
    trainable[layer + "output/dense/kernel"] = {kIntermediate, kHidden};
    trainable[layer + "output/dense/bias"] = {kHidden};
    trainable[layer + "output/LayerNorm/beta"] = {kHidden};
    trainable[layer + "output/LayerNorm/gamma"] = {kHidden};
  }
  std::map<std::string, std::vector<int64_t>> all = trainable;
  for (const auto& [name, shape] : trainable) {
    all[name + "/adam_m"] = shape;
    all[name + "/adam_v"] = shape;
  }
  return all;
}

TEST(TfCheckpoint, IndexListsEveryVariableWithItsShape) {
  const auto index = read_tf_checkpoint_index(fixture_prefix());
  auto expected = expected_float_variables();
  ASSERT_EQ(index.size(), expected.size() + 1);  // + global_step
  std::set<std::string> seen;
  for (size_t i = 0; i < index.size(); ++i) {
    const TfTensorInfo& info = index[i];
    EXPECT_TRUE(seen.insert(info.name).second) << "listed twice: " << info.name;
    if (i > 0) {
      EXPECT_LT(index[i - 1].name, info.name) << "not in key order";
    }
    EXPECT_EQ(info.shard, 0) << info.name;
    EXPECT_EQ(info.size, static_cast<uint64_t>(c10::multiply_integers(info.shape)) *
                             c10::elementSize(info.dtype))
        << info.name;
    if (info.name == "global_step") {
      EXPECT_EQ(info.dtype, at::kLong);
      EXPECT_TRUE(info.shape.empty());
      continue;
    }
    auto it = expected.find(info.name);
    ASSERT_NE(it, expected.end()) << "unexpected variable " << info.name;
    EXPECT_EQ(info.dtype, at::kFloat) << info.name;
    EXPECT_EQ(info.shape, it->second) << info.name;
  }
  EXPECT_EQ(find_info(index, "bert/embeddings/word_embeddings").shape,
            (std::vector<int64_t>{kVocab, kHidden}));
  EXPECT_EQ(find_info(index, "bert/encoder/layer_0/intermediate/dense/kernel").shape,
            (std::vector<int64_t>{kHidden, kIntermediate}));
  EXPECT_TRUE(seen.count("bert/encoder/layer_1/output/dense/kernel/adam_m"));
  EXPECT_TRUE(seen.count("cls/predictions/output_bias/adam_v"));
}

TEST(TfCheckpoint, ReadsEveryTensorInIndexOrder) {
  const auto index = read_tf_checkpoint_index(fixture_prefix());
  const NamedTensors tensors = read_tf_checkpoint(fixture_prefix());
  ASSERT_EQ(tensors.size(), index.size());
  for (size_t i = 0; i < index.size(); ++i) {
    const auto& [name, t] = tensors[i];
    EXPECT_EQ(name, index[i].name);
    EXPECT_EQ(t.device(), at::kCPU);
    EXPECT_EQ(t.scalar_type(), index[i].dtype) << name;
    EXPECT_EQ(t.sizes().vec(), index[i].shape) << name;
    EXPECT_TRUE(t.is_contiguous()) << name;
    if (t.is_floating_point()) {
      EXPECT_TRUE(at::isfinite(t).all().item<bool>()) << name;
    }
    if (name.size() > 7 && name.compare(name.size() - 7, 7, "/adam_v") == 0) {
      EXPECT_TRUE((t >= 0).all().item<bool>()) << name << ": a second moment is never negative";
    }
  }
  // The bytes are the shard's, unconverted: word_embeddings checked against a plain file read.
  const auto& info = find_info(index, "bert/embeddings/word_embeddings");
  const std::string raw =
      bytes_at(fixture_prefix().string() + ".data-00000-of-00001", info.offset, info.size);
  for (const auto& [name, t] : tensors) {
    if (name != info.name) continue;
    ASSERT_EQ(raw.size(), static_cast<size_t>(t.numel()) * t.element_size());
    EXPECT_EQ(std::memcmp(raw.data(), t.data_ptr(), raw.size()), 0);
  }
}

TEST(TfCheckpoint, CrcRecheckedFromRawBytesAndStoredMasked) {
  const auto index = read_tf_checkpoint_index(fixture_prefix());
  const fs::path data = fixture_prefix().string() + ".data-00000-of-00001";
  const fs::path index_file = fixture_prefix().string() + ".index";
  const std::string index_bytes = testing::read_file(index_file);
  for (const char* name : {"bert/embeddings/word_embeddings",
                           "bert/encoder/layer_1/intermediate/dense/kernel", "global_step"}) {
    const auto& info = find_info(index, name);
    const std::string raw = bytes_at(data, info.offset, info.size);
    EXPECT_EQ(crc_of(raw), info.crc32c) << name;
    // The record (an uncompressed table block) holds the masked form as a little-endian fixed32
    // after field tag 6 (0x35), as TensorFlow's BundleWriter writes crc32c::Mask(crc).
    const uint32_t m = crc32c_mask(info.crc32c);
    const std::string field = {'\x35', static_cast<char>(m & 0xff), static_cast<char>(m >> 8),
                               static_cast<char>(m >> 16), static_cast<char>(m >> 24)};
    EXPECT_NE(index_bytes.find(field), std::string::npos) << name << ": masked crc not found";
  }
}

TEST(TfCheckpoint, NamedByPrefixIndexOrDataShard) {
  const fs::path prefix = fixture_prefix();
  const fs::path index = prefix.string() + ".index";
  EXPECT_EQ(tf_checkpoint_index_path(prefix), index);
  EXPECT_EQ(tf_checkpoint_index_path(index), index);
  EXPECT_EQ(tf_checkpoint_index_path(prefix.string() + ".data-00000-of-00001"), index);
  const size_t n = read_tf_checkpoint(prefix).size();
  EXPECT_EQ(read_tf_checkpoint(index).size(), n);
  EXPECT_EQ(read_tf_checkpoint(prefix.string() + ".data-00000-of-00001").size(), n);

  const std::string missing =
      data_error_of([&] { tf_checkpoint_index_path(prefix.parent_path() / "no_such_model.ckpt"); });
  EXPECT_CONTAINS(missing, "looked for");
  EXPECT_CONTAINS(missing, "no_such_model.ckpt.index");
  EXPECT_CONTAINS(data_error_of([&] { tf_checkpoint_index_path(prefix.parent_path()); }),
                  "is a folder");
  EXPECT_CONTAINS(data_error_of([&] { tf_checkpoint_index_path(prefix.string() + "x.index"); }),
                  "no such checkpoint index file");
  EXPECT_CONTAINS(
      data_error_of([&] { tf_checkpoint_index_path(prefix.string() + "x.data-00000-of-00001"); }),
      "bert_model.ckptx.index does not exist");
}

TEST(TfCheckpoint, RecognisesATableByItsMagicNumber) {
  const fs::path prefix = fixture_prefix();
  EXPECT_TRUE(is_tf_checkpoint_index(prefix.string() + ".index"));
  EXPECT_FALSE(is_tf_checkpoint_index(prefix.string() + ".data-00000-of-00001"));
  EXPECT_FALSE(is_tf_checkpoint_index(prefix.parent_path() / "bert_config.json"));
  EXPECT_FALSE(is_tf_checkpoint_index(prefix.parent_path() / "missing.index"));
  EXPECT_FALSE(is_tf_checkpoint_index(prefix.parent_path()));
  TempDir dir;
  // The magic number alone is not a table: a footer is 48 bytes.
  const std::string index_bytes = testing::read_file(prefix.string() + ".index");
  testing::write_file(dir / "short", index_bytes.substr(index_bytes.size() - 40));
  EXPECT_FALSE(is_tf_checkpoint_index(dir / "short"));
}

// ---------------------------------------------------------------------------------------------
// Damaged copies of the fixture

TEST(TfCheckpoint, FlippedDataByteNamesTheTensor) {
  TempDir dir;
  const fs::path prefix = copy_fixture(dir);
  const fs::path data = prefix.string() + ".data-00000-of-00001";
  const auto index = read_tf_checkpoint_index(prefix);
  const auto& victim = find_info(index, "bert/encoder/layer_0/intermediate/dense/kernel");
  // Flip one byte in the middle of its bytes, then find which record covers that byte from the
  // offsets alone (the victim, unless records overlap).
  const uint64_t at_byte = victim.offset + victim.size / 2;
  std::string covering;
  for (const auto& info : index) {
    if (info.offset <= at_byte && at_byte < info.offset + info.size) {
      EXPECT_TRUE(covering.empty()) << "two records cover byte " << at_byte;
      covering = info.name;
    }
  }
  ASSERT_EQ(covering, victim.name);
  {
    std::fstream f(data, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at_byte));
    const char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(at_byte));
    f.put(static_cast<char>(c ^ 0x40));
  }
  const std::string what = data_error_of([&] { read_tf_checkpoint(prefix); });
  EXPECT_EQ(
      what.rfind(data.string() + ": tensor '" + covering + "': CRC-32C mismatch (stored 0x", 0), 0u)
      << what;
  EXPECT_CONTAINS(what, "the data shard is corrupt");
  // The index itself is untouched.
  EXPECT_EQ(read_tf_checkpoint_index(prefix).size(), index.size());
}

TEST(TfCheckpoint, TruncatedDataShard) {
  TempDir dir;
  const fs::path prefix = copy_fixture(dir);
  const fs::path data = prefix.string() + ".data-00000-of-00001";
  const auto index = read_tf_checkpoint_index(prefix);
  const uint64_t new_size = fs::file_size(data) - 10;
  fs::resize_file(data, new_size);
  std::string first_cut;  // in key order, as they are read
  for (const auto& info : index) {
    if (info.offset + info.size > new_size) {
      first_cut = info.name;
      break;
    }
  }
  ASSERT_FALSE(first_cut.empty());
  const std::string what = data_error_of([&] { read_tf_checkpoint(prefix); });
  EXPECT_CONTAINS(what, data.string() + ": tensor '" + first_cut + "'");
  EXPECT_CONTAINS(what, "the data shard is truncated");
  fs::resize_file(data, 0);
  EXPECT_CONTAINS(data_error_of([&] { read_tf_checkpoint(prefix); }), "truncated");
}

TEST(TfCheckpoint, TruncatedIndex) {
  TempDir dir;
  const fs::path prefix = copy_fixture(dir);
  const fs::path index = prefix.string() + ".index";
  const uint64_t size = fs::file_size(index);
  for (uint64_t keep : {size - 1, size / 2, uint64_t{47}, uint64_t{0}}) {
    fs::resize_file(index, keep);
    const std::string what = data_error_of([&] { read_tf_checkpoint_index(prefix); });
    EXPECT_CONTAINS(what, index.string() + ": not a TensorFlow checkpoint index");
    EXPECT_CONTAINS(what, "truncated");
  }
}

TEST(TfCheckpoint, CorruptIndexBlockFailsItsChecksum) {
  TempDir dir;
  const fs::path prefix = copy_fixture(dir);
  const fs::path index = prefix.string() + ".index";
  std::string bytes = testing::read_file(index);
  bytes[100] = static_cast<char>(bytes[100] ^ 0x01);  // inside the first data block
  testing::write_file(index, bytes);
  const std::string what = data_error_of([&] { read_tf_checkpoint_index(prefix); });
  EXPECT_CONTAINS(what, index.string() + ": reading the checkpoint index (a LevelDB table)");
  EXPECT_CONTAINS(what, "checksum");
}

TEST(TfCheckpoint, MissingDataShard) {
  TempDir dir;
  const fs::path prefix = copy_fixture(dir);
  fs::remove(prefix.string() + ".data-00000-of-00001");
  EXPECT_FALSE(read_tf_checkpoint_index(prefix).empty());  // the index alone still reads
  const std::string what = data_error_of([&] { read_tf_checkpoint(prefix); });
  EXPECT_CONTAINS(what, (dir / "bert_model.ckpt.data-00000-of-00001").string() +
                            ": cannot open this data shard");
  EXPECT_CONTAINS(what, "No such file");
}

TEST(TfCheckpoint, NonTableFile) {
  TempDir dir;
  for (const std::string& contents :
       {std::string("{\"hidden_size\": 4}\n"), std::string(4096, 'x'), std::string()}) {
    testing::write_file(dir / "model.ckpt.index", contents);
    const std::string what = data_error_of([&] { read_tf_checkpoint(dir / "model.ckpt"); });
    EXPECT_CONTAINS(what,
                    (dir / "model.ckpt.index").string() + ": not a TensorFlow checkpoint index");
  }
}

// ---------------------------------------------------------------------------------------------
// Tables built here: LevelDB's table format (table/format.cc) and protobuf's wire format, so the
// cases no real fixture has are covered too. The block checksums use crc32c_mask(), and LevelDB
// verifies them with its own code: a check of the mask as well.

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string fixed32(uint32_t v) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

std::string fixed64(uint64_t v) { return fixed32(static_cast<uint32_t>(v)) + fixed32(v >> 32); }

std::string pb_varint(int field, uint64_t v) {
  return varint(uint64_t(field) << 3 | 0) + varint(v);
}
std::string pb_bytes(int field, const std::string& s) {
  return varint(uint64_t(field) << 3 | 2) + varint(s.size()) + s;
}
std::string pb_fixed32(int field, uint32_t v) {
  return varint(uint64_t(field) << 3 | 5) + fixed32(v);
}

using Records = std::vector<std::pair<std::string, std::string>>;

/// One block: every entry a restart point (no shared key prefix), one restart.
std::string block(const Records& records) {
  std::string b;
  for (const auto& [k, v] : records) {
    b += varint(0);
    b += varint(k.size());
    b += varint(v.size());
    b += k;
    b += v;
  }
  b += fixed32(0);  // the one restart offset
  b += fixed32(1);  // restart count
  return b;
}

/// A LevelDB table of `records` (sorted, non-empty) in one uncompressed data block.
std::string table(const Records& records) {
  std::string out;
  auto add_block = [&](const std::string& contents) {
    const uint64_t offset = out.size();
    const char type = 0;  // kNoCompression
    out += contents;
    out.push_back(type);
    out += fixed32(crc32c_mask(crc32c_extend(crc_of(contents), &type, 1)));
    return varint(offset) + varint(contents.size());  // a BlockHandle
  };
  const std::string data = add_block(block(records));
  const std::string meta = add_block(block({}));
  const std::string index = add_block(block({{records.back().first, data}}));
  std::string footer = meta + index;
  footer.resize(40, '\0');
  return out + footer + fixed64(0xdb4775248b80fb57ull);
}

std::string header(int num_shards, int endianness = 0) {
  return pb_varint(1, num_shards) + pb_varint(2, endianness) + pb_bytes(3, pb_varint(1, 1));
}

struct EntrySpec {
  int dtype = 1;
  std::vector<int64_t> shape;
  int shard = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t stored_crc = 0;
  std::string extra;  ///< appended fields (slices, unknown fields)
};

std::string entry(const EntrySpec& e) {
  std::string shape;
  for (int64_t d : e.shape) shape += pb_bytes(2, pb_varint(1, static_cast<uint64_t>(d)));
  return pb_varint(1, e.dtype) + pb_bytes(2, shape) + pb_varint(3, e.shard) +
         pb_varint(4, e.offset) + pb_varint(5, e.size) + pb_fixed32(6, e.stored_crc) + e.extra;
}

/// Writes `prefix.index` and returns `prefix`.
fs::path write_index(const TempDir& dir, const Records& records) {
  testing::write_file(dir / "m.ckpt.index", table(records));
  return dir / "m.ckpt";
}

TEST(TfCheckpointBuilt, ReadsEveryDtypeAcrossShards) {
  TempDir dir;
  const std::vector<std::pair<std::string, at::Tensor>> tensors = {
      {"a/bf16", at::randn({3}).to(at::kBFloat16)},
      {"a/double", at::randn({2, 2}, at::kDouble)},
      {"a/float", at::randn({2, 3})},
      {"b/bool", at::tensor({1, 0, 1}, at::kByte).to(at::kBool)},
      {"b/empty", at::empty({0, 4})},
      {"b/half", at::randn({5}).to(at::kHalf)},
      {"c/int16", at::arange(-3, 3, at::kShort)},
      {"c/int32", at::arange(6, at::kInt).reshape({3, 2})},
      {"c/int64", at::tensor(int64_t{1} << 40)},
      {"c/int8", at::arange(-4, 4, at::kChar)},
      {"c/uint8", at::arange(250, 256, at::kInt).to(at::kByte)},
  };
  const std::map<at::ScalarType, int> tf_dtype = {
      {at::kFloat, 1}, {at::kDouble, 2}, {at::kInt, 3},   {at::kByte, 4},      {at::kShort, 5},
      {at::kChar, 6},  {at::kLong, 9},   {at::kBool, 10}, {at::kBFloat16, 14}, {at::kHalf, 19}};
  Records records = {{"", header(2)}};
  std::string shards[2];
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i].second;
    std::string bytes(static_cast<size_t>(t.numel()) * t.element_size(), '\0');
    if (!bytes.empty()) std::memcpy(bytes.data(), t.data_ptr(), bytes.size());
    EntrySpec e;
    e.dtype = tf_dtype.at(t.scalar_type());
    e.shape = t.sizes().vec();
    e.shard = static_cast<int>(i % 2);
    e.offset = shards[e.shard].size();
    e.size = bytes.size();
    e.stored_crc = crc32c_mask(crc_of(bytes));
    e.extra = pb_bytes(15, "a field from the future");  // unknown fields are skipped
    shards[e.shard] += bytes;
    records.emplace_back(tensors[i].first, entry(e));
  }
  const fs::path prefix = write_index(dir, records);
  testing::write_file(prefix.string() + ".data-00000-of-00002", shards[0]);
  testing::write_file(prefix.string() + ".data-00001-of-00002", shards[1]);
  const NamedTensors back = read_tf_checkpoint(prefix.string() + ".data-00001-of-00002");
  ASSERT_EQ(back.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(back[i].first, tensors[i].first);
    EXPECT_EQ(back[i].second.scalar_type(), tensors[i].second.scalar_type()) << back[i].first;
    EXPECT_TRUE(at::equal(back[i].second, tensors[i].second)) << back[i].first;
  }
  fs::remove(prefix.string() + ".data-00001-of-00002");
  EXPECT_CONTAINS(data_error_of([&] { read_tf_checkpoint(prefix); }),
                  "m.ckpt.data-00001-of-00002: cannot open this data shard");
}

/// The error of reading a table of a header and one tensor "t" with `e` (its 8 data bytes are
/// zeros unless the spec says otherwise).
std::string error_for(const EntrySpec& e, const std::string& head = header(1)) {
  TempDir dir;
  const fs::path prefix = write_index(dir, {{"", head}, {"t", entry(e)}});
  testing::write_file(prefix.string() + ".data-00000-of-00001", std::string(8, '\0'));
  return data_error_of([&] { read_tf_checkpoint(prefix); });
}

EntrySpec eight_zero_bytes() {
  EntrySpec e;
  e.dtype = 1;
  e.shape = {2};
  e.size = 8;
  e.stored_crc = crc32c_mask(crc_of(std::string(8, '\0')));
  return e;
}

TEST(TfCheckpointBuilt, RefusesWhatItCannotRead) {
  EXPECT_CONTAINS(error_for(eight_zero_bytes(), header(1, 1)), "big-endian");
  EntrySpec e = eight_zero_bytes();
  e.extra = pb_bytes(7, pb_bytes(1, pb_varint(1, 0)));  // one TensorSliceProto
  EXPECT_CONTAINS(error_for(e), "tensor 't': partitioned variable not supported");
  e = eight_zero_bytes();
  e.dtype = 7;
  EXPECT_CONTAINS(error_for(e), "tensor 't': dtype DT_STRING (7) is not supported");
  e.dtype = 101;  // DT_FLOAT_REF
  EXPECT_CONTAINS(error_for(e), "tensor 't': dtype 101 is not supported");
  e = eight_zero_bytes();
  e.shape = {3};
  EXPECT_CONTAINS(error_for(e),
                  "tensor 't': the record says 8 bytes but dtype Float and shape [3] need 12");
  e = eight_zero_bytes();
  e.shape = {-1, 2};
  EXPECT_CONTAINS(error_for(e), "negative dimension -1");
  e = eight_zero_bytes();
  e.shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_CONTAINS(error_for(e), "the shape is too large");
  e = eight_zero_bytes();
  e.shard = 1;
  EXPECT_CONTAINS(error_for(e), "shard_id 1 is outside the header's 1 shards");
  e = eight_zero_bytes();
  e.offset = 4;
  EXPECT_CONTAINS(error_for(e), "bytes [4, 12) run past the end of the file (8 bytes)");
  e = eight_zero_bytes();
  e.offset = ~uint64_t{0} >> 1;  // int64 max: offset + size would overflow
  EXPECT_CONTAINS(error_for(e), "run past the end of the file");
  e = eight_zero_bytes();
  e.stored_crc = crc_of(std::string(8, '\0'));  // unmasked: not what TensorFlow writes
  EXPECT_CONTAINS(error_for(e), "CRC-32C mismatch");
  EXPECT_CONTAINS(error_for(eight_zero_bytes(), pb_varint(2, 0)),
                  "header says 0 data shards but the index lists 1 tensors");
}

TEST(TfCheckpointBuilt, TheRecordThoseCasesBreakReads) {
  TempDir dir;
  const fs::path prefix = write_index(dir, {{"", header(1)}, {"t", entry(eight_zero_bytes())}});
  testing::write_file(prefix.string() + ".data-00000-of-00001", std::string(8, '\0'));
  const NamedTensors back = read_tf_checkpoint(prefix);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(at::equal(back[0].second, at::zeros({2})));
}

TEST(TfCheckpointBuilt, MalformedProtobufIsADataError) {
  const std::string good = entry(eight_zero_bytes());
  std::vector<std::string> bad = {
      "\x0a\x05"
      "ab"s,                                            // a length-delimited field past the end
      "\x08"s,                                          // a varint cut short
      "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"s,  // a varint over 64 bits
      "\x35\x01\x02"s,                                  // fixed32 cut short
      "\x0b"s,                                          // wire type 3 (a group)
      "\x00\x01"s,                                      // field 0
      "\x0d\x00\x00\x00\x00"s,                          // dtype as a fixed32
      "\x12\x02\x12\x05"s,                              // a dim overrunning the shape
  };
  // Every proper prefix of a good record: cut inside a field, or a shorter message whose size
  // or CRC no longer fits the 8 data bytes.
  for (size_t cut = 0; cut < good.size(); ++cut) bad.push_back(good.substr(0, cut));
  for (const std::string& value : bad) {
    TempDir dir;
    const fs::path prefix = write_index(dir, {{"", header(1)}, {"t", value}});
    testing::write_file(prefix.string() + ".data-00000-of-00001", std::string(8, '\0'));
    EXPECT_CONTAINS(data_error_of([&] { read_tf_checkpoint(prefix); }), ": tensor 't'")
        << "for a " << value.size() << "-byte record";
  }
  // Random records: a DataError or a valid result, nothing else.
  uint64_t state = 42;
  for (int trial = 0; trial < 200; ++trial) {
    std::string value(trial % 40, '\0');
    for (auto& c : value) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      c = static_cast<char>(state >> 56);
    }
    TempDir dir;
    const fs::path prefix = write_index(dir, {{"", header(1)}, {"t", value}});
    try {
      read_tf_checkpoint_index(prefix);
    } catch (const DataError&) {
    }
  }
  EXPECT_CONTAINS(data_error_of([&] {
                    TempDir dir;
                    read_tf_checkpoint_index(write_index(dir, {{"t", good}}));
                  }),
                  "has no header record");
}

}  // namespace
}  // namespace bertlab
