// safetensors: round trips, and a clear error for each way a header can lie.

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/safetensors.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(Safetensors, RoundTripsEveryDtypeShapeAndMetadata) {
  TempDir dir;
  NamedTensors tensors = {
      {"bert.embeddings.word_embeddings.weight", at::randn({5, 3})},
      {"scalar", at::tensor(3.5, at::kDouble).reshape({})},
      {"ids", at::arange(7, at::kLong)},
      {"half", at::randn({2, 2}).to(at::kHalf)},
      {"bf16", at::randn({3}).to(at::kBFloat16)},
      {"mask", at::tensor({1, 0, 1}, at::kByte).to(at::kBool)},
      {"bytes", at::arange(4, at::kByte)},
      {"empty", at::empty({0, 4})},
      {"strided", at::randn({4, 6}).t()},  // not contiguous
  };
  write_safetensors(dir / "m.safetensors", tensors, {{"format", "pt"}});
  std::map<std::string, std::string> metadata;
  NamedTensors back = read_safetensors(dir / "m.safetensors", &metadata);
  EXPECT_EQ(metadata.at("format"), "pt");
  ASSERT_EQ(back.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(back[i].first, tensors[i].first);  // header order kept
    EXPECT_EQ(back[i].second.scalar_type(), tensors[i].second.scalar_type());
    EXPECT_TRUE(at::equal(back[i].second, tensors[i].second)) << tensors[i].first;
  }
  // Data starts 8-byte aligned.
  const std::string raw = testing::read_file(dir / "m.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(raw[i]);
  EXPECT_EQ(n % 8, 0u);
}

/// A file with `header` (padded) followed by `data_bytes` zero bytes.
std::string file_with(const std::string& header, size_t data_bytes) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + std::string(data_bytes, '\0');
}

std::string error_of(const std::string& contents) {
  TempDir dir;
  testing::write_file(dir / "bad.safetensors", contents);
  try {
    read_safetensors(dir / "bad.safetensors");
  } catch (const DataError& e) {
    std::string what = e.what();
    const std::string prefix = (dir / "bad.safetensors").string() + ": ";
    EXPECT_EQ(what.rfind(prefix, 0), 0u) << what;  // every message names the file
    return what.substr(prefix.size());
  }
  return "no error";
}

TEST(Safetensors, RejectsEachKindOfCorruptionWithItsOwnMessage) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(error_of(file_with(ok, 8)), "no error");
  std::string huge = file_with(ok, 8);
  huge[7] = 0x7f;
  /// A tensor entry "a" with these fields.
  auto one = [](const std::string& fields) { return "{\"a\":{" + fields + "}}"; };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc", "shorter than the 8-byte header length"},
      {huge, "does not fit the file"},
      {file_with("[1,2]", 0), "not a JSON object"},
      {file_with("{\"a\":", 0), "not valid JSON"},
      {file_with(one(R"("dtype":"F31","shape":[2],"data_offsets":[0,8])"), 8),
       "tensor 'a': unsupported dtype \"F31\""},
      {file_with(one(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])"), 8),
       "non-integer or negative dimension"},
      {file_with(one(R"("dtype":"F32","shape":[2],"data_offsets":[0,16])"), 8),
       "fall outside the 8 data bytes"},
      {file_with(one(R"("dtype":"F32","shape":[3],"data_offsets":[0,8])"), 8),
       "cover 8 bytes but dtype and shape need 12"},
      {file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 8),
       "overlaps the previous tensor"},
      {file_with(one(R"("dtype":"F32","shape":[1],"data_offsets":[4,8])"), 8),
       "a hole precedes it"},
      {file_with(ok, 12), "4 data bytes after the last tensor"},
      {file_with(one(R"("dtype":"F32")"), 0), "needs dtype, shape and data_offsets"},
  };
  for (const auto& [contents, expected] : cases) {
    const std::string error = error_of(contents);
    EXPECT_NE(error.find(expected), std::string::npos)
        << "expected: " << expected << "\ngot: " << error;
  }
}

}  // namespace
}  // namespace bertlab
