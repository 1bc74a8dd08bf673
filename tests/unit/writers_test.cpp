// The output writers of the data tools: JSON written directly (byte for byte what json.dumps, and
// the general python_json_dumps(), write), TFRecord framing appended in place, and the ordered
// encoding on several threads.

#include <bertlab/error.h>
#include <bertlab/io/ordered_blocks.h>
#include <bertlab/io/python_json.h>
#include <bertlab/io/tfrecord.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace bertlab {
namespace {

using testing::data_path;

std::string direct(std::string_view text) {
  std::string out = "prefix:";
  append_json_string(out, text);
  return out.substr(7);
}

std::string general(const std::string& text) { return python_json_dumps(text); }

TEST(JsonWriter, StringsAsJsonDumpsWritesThem) {
  // Hand-checked against CPython 3.11's json.dumps (ensure_ascii): lower-case hex, DEL escaped,
  // astral characters as surrogate pairs, "/" left alone.
  EXPECT_EQ(direct("plain ascii / ~"), R"("plain ascii / ~")");
  EXPECT_EQ(direct("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(direct("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(direct(std::string("\x00\x01\x1f\x7f", 4)), R"("\u0000\u0001\u001f\u007f")");
  EXPECT_EQ(direct("caf\xc3\xa9"), R"("caf\u00e9")");
  EXPECT_EQ(direct("\xe4\xb8\xad\xe6\x96\x87"), R"("\u4e2d\u6587")");
  EXPECT_EQ(direct("\xf0\x9f\x98\x80"), R"("\ud83d\ude00")");
  EXPECT_EQ(direct("\xf4\x8f\xbf\xbf"), R"("\udbff\udfff")");
  EXPECT_EQ(direct(""), R"("")");
  // Every one-byte string and every token of the bundled vocabulary, as the general writer.
  for (int c = 0; c < 128; ++c) {
    const std::string s(1, static_cast<char>(c));
    EXPECT_EQ(direct(s), general(s)) << c;
  }
  const Vocab vocab = Vocab::load(data_path("vocab/bert-base-uncased/vocab.txt"));
  size_t non_ascii = 0;
  for (const auto& token : vocab.tokens()) {
    ASSERT_EQ(direct(token), general(token)) << token;
    for (const char c : token) non_ascii += static_cast<unsigned char>(c) >= 0x80 ? 1 : 0;
  }
  EXPECT_GT(non_ascii, 1000U);  // the test covers multi-byte characters
}

TEST(JsonWriter, InvalidUtf8IsAnError) {
  for (const char* bad : {"\xff", "a\xc3", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80",
                          "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", "\x80"}) {
    EXPECT_THROW(direct(bad), Error) << bad;
  }
}

TEST(JsonWriter, IntegerListsAsJsonDumpsWritesThem) {
  const auto list = [](const std::vector<int64_t>& values, size_t zeros) {
    std::string out;
    append_json_int_list(out, values.data(), values.size(), zeros);
    return out;
  };
  const auto general_list = [](std::vector<int64_t> values, size_t zeros) {
    values.resize(values.size() + zeros, 0);
    return python_json_dumps(nlohmann::ordered_json(values));
  };
  const std::vector<int64_t> edge = {0,
                                     -1,
                                     7,
                                     10,
                                     99,
                                     100,
                                     30521,
                                     -30522,
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};
  EXPECT_EQ(list({}, 0), "[]");
  EXPECT_EQ(list({}, 3), "[0, 0, 0]");
  EXPECT_EQ(list({5, 6}, 1), "[5, 6, 0]");
  for (const size_t zeros : {0, 1, 5}) {
    EXPECT_EQ(list(edge, zeros), general_list(edge, zeros));
    EXPECT_EQ(list({edge[8]}, zeros), general_list({edge[8]}, zeros));
  }
  std::string out = "{\"a\": ";
  const std::vector<int32_t> ids = {101, 2023, 102};
  append_json_int_list(out, ids.data(), ids.size(), 2);
  EXPECT_EQ(out, "{\"a\": [101, 2023, 102, 0, 0]");
  append_json_int(out, -42);
  EXPECT_EQ(out, "{\"a\": [101, 2023, 102, 0, 0]-42");
}

TEST(TfRecordWriter, AppendedFramesAreTheFramedRecords) {
  std::string out = "head";
  const std::string data(1000, 'x');
  append_tfrecord(out, "");
  append_tfrecord(out, data);
  EXPECT_EQ(out, "head" + frame_tfrecord("") + frame_tfrecord(data));
  EXPECT_EQ(frame_tfrecord("").size(), 16U);
}

// Blocks encoded on several threads are written in order; the encoding of each block waits a
// time that makes later blocks finish first.
TEST(OrderedBlocks, WritesInOrderWhateverFinishesFirst) {
  for (const int threads : {1, 2, 3, 8}) {
    for (const size_t blocks : {size_t{0}, size_t{1}, size_t{5}, size_t{100}}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, " << blocks << " blocks");
      std::vector<size_t> written;
      std::atomic<int> in_flight{0};
      std::atomic<int> most_in_flight{0};
      encode_blocks_in_order<std::string>(
          blocks, threads,
          [&](size_t b, std::string& block) {
            const int now = ++in_flight;
            int seen = most_in_flight.load();
            while (now > seen && !most_in_flight.compare_exchange_weak(seen, now)) {
            }
            std::this_thread::sleep_for(std::chrono::microseconds((b * 7919) % 13 * 50));
            block = std::to_string(b);
          },
          [&](size_t b, std::string& block) {
            EXPECT_EQ(block, std::to_string(b));
            written.push_back(b);
            --in_flight;
          });
      ASSERT_EQ(written.size(), blocks);
      for (size_t b = 0; b < blocks; ++b) EXPECT_EQ(written[b], b);
      // Encoded and not yet written: never more than the window of 2 blocks a thread.
      EXPECT_LE(most_in_flight.load(), std::max(1, 2 * threads));
    }
  }
}

TEST(OrderedBlocks, AFailureStopsTheWorkAndReachesTheCaller) {
  for (const int threads : {1, 2, 4}) {
    std::vector<size_t> written;
    const auto encode_fails = [&] {
      encode_blocks_in_order<size_t>(
          50, threads,
          [&](size_t b, size_t& block) {
            if (b == 20) throw DataError("block 20 is bad");
            block = b;
          },
          [&](size_t, size_t& block) { written.push_back(block); });
    };
    EXPECT_THROW(encode_fails(), DataError);
    // What was written is a run of the blocks before the bad one, in order (the caller throws
    // the file away).
    ASSERT_LE(written.size(), 20U) << threads << " threads";
    for (size_t b = 0; b < written.size(); ++b) EXPECT_EQ(written[b], b);

    size_t writes = 0;
    const auto write_fails = [&] {
      encode_blocks_in_order<size_t>(
          50, threads, [](size_t b, size_t& block) { block = b; },
          [&](size_t b, size_t&) {
            if (b == 3) throw std::runtime_error("disk full");
            ++writes;
          });
    };
    EXPECT_THROW(write_fails(), std::runtime_error);
    EXPECT_EQ(writes, 3U);
    writes = 0;
  }
}

}  // namespace
}  // namespace bertlab
