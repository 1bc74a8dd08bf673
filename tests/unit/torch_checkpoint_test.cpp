// torch.save zip checkpoints (pytorch_model.bin): the tiny Hugging Face BERT loads with the
// names, shapes and bytes torch wrote; hostile, truncated, legacy and corrupt files are refused
// with a DataError that says why; the restricted unpickler survives mutated pickles.

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/torch_checkpoint.h>
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "io/pickle_reader.h"
#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

fs::path tiny_model() { return testing::data_path("checkpoints/tiny-pytorch/pytorch_model.bin"); }

/// The DataError message `f` throws ("" and a test failure if it throws none).
template <typename F>
std::string data_error_of(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DataError thrown";
  return "";
}

/// Every record of a torch.save zip (names relative to its top folder), read once.
std::map<std::string, std::string> records_of(const fs::path& file) {
  caffe2::serialize::PyTorchStreamReader reader(file.string());
  std::map<std::string, std::string> records;
  for (const std::string& name : reader.getAllRecords()) {
    auto [data, size] = reader.getRecord(name);
    records[name] = std::string(static_cast<const char*>(data.get()), size);
  }
  return records;
}

/// A torch.save-style zip (top folder "archive") holding `records`, written by libtorch's own
/// writer.
std::string zip_of(const std::map<std::string, std::string>& records) {
  std::string out;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) -> size_t {
      out.append(static_cast<const char*>(data), n);
      return n;
    });
    for (const auto& [name, bytes] : records) {
      // The writer adds these itself (serialization_id: libtorch >= 2.1).
      if (name == "version" || name == ".data/version" || name == ".data/serialization_id") {
        continue;
      }
      writer.writeRecord(name, bytes.data(), bytes.size());
    }
    writer.writeEndOfFile();
  }
  return out;
}

StorageRecordLoader loader_of(const std::map<std::string, std::string>& records) {
  return [&records](const std::string& key) {
    const auto it = records.find("data/" + key);
    if (it == records.end()) throw DataError("no record data/" + key);
    at::Tensor t = at::empty({static_cast<int64_t>(it->second.size())}, at::kByte);
    if (!it->second.empty()) std::memcpy(t.data_ptr(), it->second.data(), it->second.size());
    return t;
  };
}

std::vector<int64_t> shape_of(const at::Tensor& t) { return t.sizes().vec(); }

TEST(TorchCheckpoint, TinyBertLoadsWithTheNamesAndShapesOfItsConfig) {
  // config.json: hidden 16, 1 layer, intermediate 64, vocab_size 402, max_position_embeddings 16,
  // type_vocab_size 2, 9 labels; BertForTokenClassification has no pooler.
  const NamedTensors tensors = read_torch_checkpoint(tiny_model());
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"bert.embeddings.position_ids", {1, 16}},
      {"bert.embeddings.word_embeddings.weight", {402, 16}},
      {"bert.embeddings.position_embeddings.weight", {16, 16}},
      {"bert.embeddings.token_type_embeddings.weight", {2, 16}},
      {"bert.embeddings.LayerNorm.weight", {16}},
      {"bert.embeddings.LayerNorm.bias", {16}},
      {"bert.encoder.layer.0.attention.self.query.weight", {16, 16}},
      {"bert.encoder.layer.0.attention.self.query.bias", {16}},
      {"bert.encoder.layer.0.attention.self.key.weight", {16, 16}},
      {"bert.encoder.layer.0.attention.self.key.bias", {16}},
      {"bert.encoder.layer.0.attention.self.value.weight", {16, 16}},
      {"bert.encoder.layer.0.attention.self.value.bias", {16}},
      {"bert.encoder.layer.0.attention.output.dense.weight", {16, 16}},
      {"bert.encoder.layer.0.attention.output.dense.bias", {16}},
      {"bert.encoder.layer.0.attention.output.LayerNorm.weight", {16}},
      {"bert.encoder.layer.0.attention.output.LayerNorm.bias", {16}},
      {"bert.encoder.layer.0.intermediate.dense.weight", {64, 16}},
      {"bert.encoder.layer.0.intermediate.dense.bias", {64}},
      {"bert.encoder.layer.0.output.dense.weight", {16, 64}},
      {"bert.encoder.layer.0.output.dense.bias", {16}},
      {"bert.encoder.layer.0.output.LayerNorm.weight", {16}},
      {"bert.encoder.layer.0.output.LayerNorm.bias", {16}},
      {"classifier.weight", {9, 16}},
      {"classifier.bias", {9}},
  };
  ASSERT_EQ(tensors.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, tensor] = tensors[i];
    EXPECT_EQ(name, expected[i].first);  // the pickle's (state dict's) order
    EXPECT_EQ(shape_of(tensor), expected[i].second) << name;
    EXPECT_TRUE(tensor.device().is_cpu()) << name;
    EXPECT_TRUE(tensor.is_contiguous()) << name;
    EXPECT_EQ(name.rfind("bert.pooler.", 0), std::string::npos) << name;
    if (name == "bert.embeddings.position_ids") {
      // A registered buffer: torch.arange(max_position_embeddings).expand((1, -1)), int64.
      EXPECT_EQ(tensor.scalar_type(), at::kLong);
      EXPECT_TRUE(at::equal(tensor, at::arange(16, at::kLong).unsqueeze(0)));
    } else {
      EXPECT_EQ(tensor.scalar_type(), at::kFloat) << name;
      EXPECT_TRUE(at::isfinite(tensor).all().item<bool>()) << name;
    }
  }
  // LayerNorm weights are trained scales near 1, not zeros or garbage.
  EXPECT_NEAR(tensors[4].second.mean().item<float>(), 1.0f, 0.2f);
}

TEST(TorchCheckpoint, ValuesAreTheRawBytesOfTheZipRecord) {
  // An independent path: find the stored (uncompressed) zip entry of the only 25728-byte record
  // (402 x 16 float32: the word embeddings) by its local file header and compare bitwise.
  const std::string raw = testing::read_file(tiny_model());
  const std::string name = "archive/data/1";
  constexpr size_t kBytes = size_t{402} * 16 * 4;
  size_t data_begin = std::string::npos;
  for (size_t at = raw.find("PK\x03\x04"); at != std::string::npos;
       at = raw.find("PK\x03\x04", at + 1)) {
    auto u16 = [&](size_t off) {
      return static_cast<size_t>(static_cast<uint8_t>(raw[at + off])) |
             static_cast<size_t>(static_cast<uint8_t>(raw[at + off + 1])) << 8;
    };
    if (at + 30 > raw.size() || u16(26) != name.size()) continue;
    if (raw.compare(at + 30, name.size(), name) != 0) continue;
    ASSERT_EQ(u16(8), 0u) << "the record is not stored uncompressed";
    data_begin = at + 30 + u16(26) + u16(28);
    break;
  }
  ASSERT_NE(data_begin, std::string::npos);
  ASSERT_LE(data_begin + kBytes, raw.size());

  const NamedTensors tensors = read_torch_checkpoint(tiny_model());
  const at::Tensor& embeddings = tensors.at(1).second;
  ASSERT_EQ(tensors.at(1).first, "bert.embeddings.word_embeddings.weight");
  ASSERT_EQ(static_cast<size_t>(embeddings.numel() * embeddings.element_size()), kBytes);
  EXPECT_EQ(std::memcmp(embeddings.data_ptr(), raw.data() + data_begin, kBytes), 0);
}

TEST(TorchCheckpoint, IsZipFileLooksAtTheFirstFourBytes) {
  EXPECT_TRUE(is_zip_file(tiny_model()));
  EXPECT_FALSE(is_zip_file(testing::data_path("checkpoints/tiny-pytorch/vocab.txt")));
  EXPECT_FALSE(is_zip_file(testing::data_path("checkpoints/tiny-pytorch/no-such-file.bin")));
  TempDir dir;
  testing::write_file(dir / "short.bin", "PK");
  EXPECT_FALSE(is_zip_file(dir / "short.bin"));
}

TEST(TorchCheckpoint, RefusesAPickleThatReferencesOsSystemAndRunsNothing) {
  // make_hostile.py: os.system("touch <marker>"), which Python's pickle.load would run.
  const fs::path marker = "/tmp/bertlab_hostile_checkpoint_executed";
  fs::remove(marker);
  const fs::path hostile = testing::data_path("checkpoints/hostile/foreign_global.bin");
  const std::string error = data_error_of([&] { read_torch_checkpoint(hostile); });
  EXPECT_NE(error.find(hostile.string() + ": data.pkl references the Python global"),
            std::string::npos)
      << error;
  // os.system pickles as posix.system on Linux.
  EXPECT_TRUE(error.find("'posix.system'") != std::string::npos ||
              error.find("'os.system'") != std::string::npos)
      << error;
  EXPECT_NE(error.find("a checkpoint may only rebuild tensors"), std::string::npos) << error;
  EXPECT_NE(error.find("torch._utils._rebuild_tensor_v2"), std::string::npos) << error;
  EXPECT_NE(error.find("so it was not loaded"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(marker));
}

TEST(TorchCheckpoint, TruncatedCopyIsAClearDataError) {
  TempDir dir;
  const std::string raw = testing::read_file(tiny_model());
  testing::write_file(dir / "half.bin", raw.substr(0, raw.size() / 2));
  const std::string error = data_error_of([&] { read_torch_checkpoint(dir / "half.bin"); });
  EXPECT_NE(error.find((dir / "half.bin").string()), std::string::npos) << error;
  EXPECT_NE(error.find("not a readable torch.save zip archive (truncated or corrupt?)"),
            std::string::npos)
      << error;
}

TEST(TorchCheckpoint, LegacyFormatIsRefusedWithTheResaveHint) {
  TempDir dir;
  // torch < 1.6 wrote pickles back to back, starting with PROTO 2 and a LONG1 magic number.
  testing::write_file(dir / "legacy.bin",
                      std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15));
  const std::string error = data_error_of([&] { read_torch_checkpoint(dir / "legacy.bin"); });
  EXPECT_NE(error.find("legacy (non-zip) torch.save format"), std::string::npos) << error;
  EXPECT_NE(error.find("re-save it with torch >= 1.6 (`torch.save(sd, f)`)"), std::string::npos)
      << error;
  EXPECT_NE(error.find("safetensors"), std::string::npos) << error;
}

TEST(TorchCheckpoint, OtherFilesAreRefused) {
  TempDir dir;
  testing::write_file(dir / "text.bin", "hello");
  EXPECT_NE(data_error_of([&] {
              read_torch_checkpoint(dir / "text.bin");
            }).find("does not start as a zip archive"),
            std::string::npos);
  testing::write_file(dir / "empty.bin", "");
  EXPECT_NE(data_error_of([&] {
              read_torch_checkpoint(dir / "empty.bin");
            }).find("does not start as a zip archive"),
            std::string::npos);
  EXPECT_NE(data_error_of([&] { read_torch_checkpoint(dir / "missing.bin"); }).find("cannot open"),
            std::string::npos);
}

TEST(TorchCheckpoint, ZipWithoutDataPklIsRefused) {
  TempDir dir;
  testing::write_file(dir / "no_pickle.bin", zip_of({{"data/0", std::string(64, '\0')}}));
  const std::string error = data_error_of([&] { read_torch_checkpoint(dir / "no_pickle.bin"); });
  EXPECT_NE(error.find("has no data.pkl record"), std::string::npos) << error;
  EXPECT_NE(error.find("data/0"), std::string::npos) << error;  // lists what is there
}

TEST(TorchCheckpoint, MissingOrShortStorageRecordIsRefused) {
  TempDir dir;
  auto records = records_of(tiny_model());
  ASSERT_EQ(records.count("data.pkl"), 1u);
  ASSERT_EQ(records.at("data/1").size(), 402u * 16 * 4);

  auto without = records;
  without.erase("data/1");
  testing::write_file(dir / "without.bin", zip_of(without));
  std::string error = data_error_of([&] { read_torch_checkpoint(dir / "without.bin"); });
  EXPECT_NE(error.find("refers to the storage record data/1, which the archive lacks"),
            std::string::npos)
      << error;

  auto shorter = records;
  shorter["data/1"].resize(100);
  testing::write_file(dir / "shorter.bin", zip_of(shorter));
  error = data_error_of([&] { read_torch_checkpoint(dir / "shorter.bin"); });
  EXPECT_NE(error.find("record data/1 holds 100 bytes, but the pickle describes 6432 elements"),
            std::string::npos)
      << error;

  // The writer's own zip reads back like torch's: the reader does not depend on alignment.
  testing::write_file(dir / "rewritten.bin", zip_of(records));
  EXPECT_EQ(read_torch_checkpoint(dir / "rewritten.bin").size(), 24u);
}

TEST(TorchCheckpoint, BigEndianStoragesAreRefused) {
  TempDir dir;
  auto records = records_of(tiny_model());
  records["byteorder"] = "big";
  testing::write_file(dir / "big.bin", zip_of(records));
  const std::string error = data_error_of([&] { read_torch_checkpoint(dir / "big.bin"); });
  EXPECT_NE(error.find("'big'-endian"), std::string::npos) << error;
  records["byteorder"] = "little";
  testing::write_file(dir / "little.bin", zip_of(records));
  EXPECT_EQ(read_torch_checkpoint(dir / "little.bin").size(), 24u);
}

// --- The unpickler on its own, with hand-written pickles --------------------------------------

/// Pieces of protocol-2 pickles, as torch.save writes them.
std::string str(const std::string& s) {
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((s.size() >> (8 * i)) & 0xff));
  return out + s;
}
std::string int1(int v) { return std::string("K") + static_cast<char>(v); }
std::string ints_tuple(const std::vector<int>& values) {
  std::string out = "(";
  for (int v : values) out += int1(v);
  return out + "t";
}
/// _rebuild_tensor_v2(storage data/<key> of `numel` floats, offset, size, stride, False, {}).
std::string tensor(const std::string& key, int numel, int offset, const std::vector<int>& size,
                   const std::vector<int>& stride) {
  return "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage") + "ctorch\nFloatStorage\n" +
         str(key) + str("cpu") + int1(numel) + "tQ" + int1(offset) + ints_tuple(size) +
         ints_tuple(stride) + "\x89}tR";
}
/// OrderedDict() filled by SETITEMS with `items` (each a pickled key followed by its value).
std::string ordered_dict(const std::string& items) {
  return "ccollections\nOrderedDict\n)R(" + items + "u";
}
std::string pickle(const std::string& body) { return "\x80\x02" + body + "."; }

std::map<std::string, std::string> float_records(const std::map<std::string, int>& numels) {
  std::map<std::string, std::string> records;
  for (const auto& [key, n] : numels) {
    at::Tensor values = at::arange(n, at::kFloat);
    records["data/" + key] = std::string(static_cast<const char*>(values.data_ptr()),
                                         size_t{4} * static_cast<size_t>(n));
  }
  return records;
}

TEST(PickleReader, FlattensNestedDictsSharesStoragesAndSkipsOtherLeaves) {
  const auto records = float_records({{"0", 12}});
  const std::string body = ordered_dict(
      str("a") + tensor("0", 12, 0, {3, 4}, {4, 1}) +  // the whole storage
      str("epoch") + int1(3) +                         // skipped
      str("outer") + "}(" + str("inner") + tensor("0", 12, 2, {2, 2}, {1, 4}) + "u" +  // a view
      str("note") + str("hello"));
  const NamedTensors tensors = unpickle_state_dict(pickle(body), loader_of(records), "test.pkl");
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].first, "a");
  EXPECT_TRUE(at::equal(tensors[0].second, at::arange(12, at::kFloat).reshape({3, 4})));
  EXPECT_EQ(tensors[1].first, "outer.inner");
  EXPECT_TRUE(tensors[1].second.is_contiguous());
  // Elements 2 + i + 4 j of the storage.
  EXPECT_TRUE(at::equal(tensors[1].second, at::tensor({2.f, 6.f, 3.f, 7.f}).reshape({2, 2})));
}

TEST(PickleReader, RebuildParameterAndStackGlobalAreAccepted) {
  const auto records = float_records({{"k", 3}});
  // Protocol 4 style: the global named by two strings and STACK_GLOBAL; MEMOIZE.
  const std::string parameter = str("torch._utils") + str("_rebuild_parameter") + "\x93\x94(" +
                                tensor("k", 3, 0, {3}, {1}) + "\x88}tR";
  const NamedTensors tensors = unpickle_state_dict(pickle(ordered_dict(str("w") + parameter)),
                                                   loader_of(records), "test.pkl");
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_TRUE(at::equal(tensors[0].second, at::arange(3, at::kFloat)));
}

std::string unpickle_error(const std::string& bytes,
                           const std::map<std::string, std::string>& records = {}) {
  return data_error_of([&] { unpickle_state_dict(bytes, loader_of(records), "test.pkl"); });
}

TEST(PickleReader, CorruptPicklesNameTheByteAndTheProblem) {
  EXPECT_EQ(unpickle_error("\x80\x02s."),
            "test.pkl: byte 2 (SETITEM): needs 2 values, but the "
            "stack holds 0");
  EXPECT_EQ(unpickle_error("\x80\x02h\x05."),
            "test.pkl: byte 2 (BINGET): memo entry 5 was never "
            "stored");
  EXPECT_NE(unpickle_error("\x80\x02}\xff.").find("byte 3 (unknown opcode): byte 0xff"),
            std::string::npos);
  EXPECT_NE(unpickle_error("\x80\x02}").find("ends at byte 3 without a STOP opcode"),
            std::string::npos);
  EXPECT_NE(unpickle_error("\x80\x02X\xff\xff\xff\x7f")
                .find("byte 2 (BINUNICODE): needs "
                      "2147483647 more bytes"),
            std::string::npos);
  EXPECT_NE(unpickle_error("\x80\x02t.").find("needs a MARK"), std::string::npos);
  EXPECT_NE(unpickle_error(pickle("]")).find("holds a list, not a dict of tensors"),
            std::string::npos);
  EXPECT_NE(unpickle_error(pickle("}K\x01K\x02s")).find("has a key of type int, not str"),
            std::string::npos);
  EXPECT_NE(unpickle_error(pickle(std::string("}q\0h\0", 5) + str("me") + std::string("h\0s", 3)))
                .find("contains itself"),
            std::string::npos);
}

TEST(PickleReader, ForeignGlobalsAreRefusedAtTheirOpcode) {
  EXPECT_NE(unpickle_error("\x80\x02"
                           "cos\nsystem\n")
                .find("test.pkl references the Python global 'os.system' (byte 2)"),
            std::string::npos);
  // STACK_GLOBAL, and the one torch.storage helper that would unpickle nested bytes.
  EXPECT_NE(
      unpickle_error("\x80\x02" + str("builtins") + str("eval") + "\x93").find("'builtins.eval'"),
      std::string::npos);
  EXPECT_NE(unpickle_error("\x80\x02"
                           "ctorch.storage\n_load_from_bytes\n")
                .find("'torch.storage._load_from_bytes'"),
            std::string::npos);
  // An allowed global used the wrong way.
  EXPECT_NE(unpickle_error(pickle("ctorch\nFloatStorage\n)R")).find("storages come only from"),
            std::string::npos);
}

TEST(PickleReader, ViewsOutsideTheirStorageAreRefused) {
  const auto records = float_records({{"0", 12}});
  auto error_for = [&](int offset, const std::vector<int>& size, const std::vector<int>& stride) {
    return unpickle_error(pickle(ordered_dict(str("t") + tensor("0", 12, offset, size, stride))),
                          records);
  };
  EXPECT_NE(error_for(1, {3, 4}, {4, 1}).find("does not fit; its storage data/0 holds 12"),
            std::string::npos);
  EXPECT_NE(error_for(0, {3, 5}, {4, 1}).find("does not fit"), std::string::npos);
  EXPECT_NE(error_for(13, {0}, {1}).find("does not fit"), std::string::npos);
  EXPECT_NE(error_for(0, {100}, {0}).find("repeats elements"), std::string::npos);
  EXPECT_NE(error_for(0, {3, 4}, {4}).find("not one stride per dimension"), std::string::npos);
  // Empty tensors anywhere inside the storage are fine.
  EXPECT_EQ(
      unpickle_state_dict(pickle(ordered_dict(str("t") + tensor("0", 12, 12, {0, 4}, {4, 1}))),
                          loader_of(records), "test.pkl")
          .at(0)
          .second.numel(),
      0);
}

TEST(PickleReader, MutatedPicklesParseOrThrowDataErrorNeverCrash) {
  const auto records = records_of(tiny_model());
  const std::string original = records.at("data.pkl");
  const auto load = loader_of(records);
  std::mt19937 rng(20240601);  // deterministic
  int runs = 0;
  int parsed = 0;
  int refused = 0;
  auto run = [&](const std::string& bytes, const std::string& what) {
    ++runs;
    try {
      unpickle_state_dict(bytes, load, "fuzz.pkl");
      ++parsed;
    } catch (const DataError&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": not a DataError: " << e.what();
    }
  };
  // Every truncation point in the first 200 bytes, then spread over the rest.
  for (size_t n = 0; n < original.size(); n += n < 200 ? 1 : 37) {
    run(original.substr(0, n), "truncated to " + std::to_string(n));
  }
  for (int i = 0; i < 400; ++i) {
    std::string bytes = original;
    const size_t at = rng() % bytes.size();
    switch (i % 4) {
      case 0:  // flip one bit
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
        break;
      case 1:  // replace a byte
        bytes[at] = static_cast<char>(rng() % 256);
        break;
      case 2:  // a length or index field gone huge
        bytes[at] = '\xff';
        if (at + 1 < bytes.size()) bytes[at + 1] = '\x7f';
        break;
      default:  // cut a slice out
        bytes.erase(at, 1 + rng() % 16);
        break;
    }
    run(bytes, "mutation " + std::to_string(i) + " at byte " + std::to_string(at));
  }
  EXPECT_GT(refused, 100);
  EXPECT_EQ(parsed + refused, runs);
}

}  // namespace
}  // namespace bertlab
