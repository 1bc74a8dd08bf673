// Streamed pretraining input: instances in file order from .jsonl and TFRecord files, wrapping
// at the end, sharded by replica, resumed from a position, read ahead at most prefetch_batches;
// and the real executable: streaming gradcheck, 3 steps + resume + 3 equal to 6 straight.

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "instance_reader.h"
#include "instance_stream.h"
#include "test_util.h"
#include "tf_example.h"

namespace bertlab::pretrain {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;
using testing::without_timings;

const InstanceShape kShape{128, 20, 30522};

fs::path golden() {
  return data_path("pretrain/sample_text-seed12345-len128-mp20-p0.15-dupe5.jsonl");
}

// The golden 60 instances written as a TFRecord.
fs::path write_tfrecord(const TempDir& dir, const std::vector<InstanceFeatures>& all) {
  const fs::path path = dir / "golden.tfrecord";
  TfRecordWriter writer(path);
  for (const auto& f : all) writer.write(serialize_example(to_example(f)));
  writer.close();
  return path;
}

// Rows [begin, begin + count) of every micro-batch of `micro`, from instance `first` on,
// wrapping around the file: what a stream must return.
Batch expected(const std::vector<InstanceFeatures>& all, int64_t first, int64_t begin,
               int64_t count) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < count; ++i) {
    rows.push_back((first + begin + i) % static_cast<int64_t>(all.size()));
  }
  return collate(all, rows, c10::Device(c10::kCPU));
}

void expect_equal(const Batch& got, const Batch& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << what << ": " << name;
    EXPECT_TRUE(at::equal(got.at(name), t)) << what << ": " << name;
  }
}

TEST(InstanceStream, ReadsInOrderAndWrapsForBothFormats) {
  const auto all = read_instances(golden(), kShape);
  ASSERT_EQ(all.size(), 60U);
  TempDir dir;
  for (const fs::path& path : {golden(), write_tfrecord(dir, all)}) {
    InstanceStream stream(path, kShape, StreamShard{8, 0, 8}, StreamPosition{}, 2);
    // 10 micro-batches of 8 = 80 instances: the second pass starts inside batch 8.
    for (int64_t b = 0; b < 10; ++b) {
      expect_equal(stream.next(c10::Device(c10::kCPU)), expected(all, b * 8, 0, 8),
                   path.filename().string() + " batch " + std::to_string(b));
    }
    const StreamPosition at = StreamPosition::from_text(stream.position(), "test");
    EXPECT_EQ(at.pass, 1);
    EXPECT_EQ(at.instances, 80);
    EXPECT_EQ(at.file.record, 20);  // lines or records into the second pass
  }
}

TEST(InstanceStream, ReplicaShardsMakeUpTheMicroBatch) {
  const auto all = read_instances(golden(), kShape);
  InstanceStream rank0(golden(), kShape, StreamShard{6, 0, 3}, StreamPosition{}, 4);
  InstanceStream rank1(golden(), kShape, StreamShard{6, 3, 3}, StreamPosition{}, 4);
  for (int64_t b = 0; b < 12; ++b) {
    expect_equal(rank0.next(c10::Device(c10::kCPU)), expected(all, b * 6, 0, 3),
                 "rank 0 batch " + std::to_string(b));
    expect_equal(rank1.next(c10::Device(c10::kCPU)), expected(all, b * 6, 3, 3),
                 "rank 1 batch " + std::to_string(b));
  }
  EXPECT_EQ(rank0.position(), rank1.position());  // both at the same place in the stream
}

TEST(InstanceStream, ResumesWhereThePositionSays) {
  const auto all = read_instances(golden(), kShape);
  TempDir dir;
  for (const fs::path& path : {golden(), write_tfrecord(dir, all)}) {
    InstanceStream straight(path, kShape, StreamShard{7, 0, 7}, StreamPosition{}, 3);
    for (int b = 0; b < 8; ++b) straight.next(c10::Device(c10::kCPU));  // 56 instances
    const std::string position = straight.position();
    InstanceStream resumed(path, kShape, StreamShard{7, 0, 7},
                           StreamPosition::from_text(position, "test"), 3);
    for (int b = 8; b < 14; ++b) {
      const Batch want = straight.next(c10::Device(c10::kCPU));
      expect_equal(resumed.next(c10::Device(c10::kCPU)), want,
                   path.filename().string() + " batch " + std::to_string(b));
      expect_equal(want, expected(all, b * 7, 0, 7), "straight batch " + std::to_string(b));
    }
    EXPECT_EQ(resumed.position(), straight.position());
  }
  EXPECT_THROW(StreamPosition::from_text("{\"pass\": 1}", "state.json"), DataError);
}

TEST(InstanceStream, ReadsAheadAtMostPrefetchBatches) {
  InstanceStream stream(golden(), kShape, StreamShard{4, 0, 4}, StreamPosition{}, 3);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (stream.queued() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(stream.queued(), 3U);
  // The reader is ahead by three batches and waits: 60 instances would fill 15.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(stream.queued(), 3U);
  stream.next(c10::Device(c10::kCPU));
  EXPECT_LE(stream.queued(), 3U);
}

TEST(InstanceStream, AMalformedLineIsAnErrorOnTheTrainingThread) {
  TempDir dir;
  const std::string text = read_file(golden());
  const size_t second_line = text.find('\n') + 1;
  const fs::path path = dir / "broken.jsonl";
  testing::write_file(
      path, text.substr(0, second_line) + "{\"input_ids\": [1, 2\n" + text.substr(second_line));
  InstanceStream stream(path, kShape, StreamShard{4, 0, 4}, StreamPosition{}, 2);
  try {
    stream.next(c10::Device(c10::kCPU));
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.jsonl:2: not JSON"), std::string::npos)
        << e.what();
  }
  TempDir empty_dir;
  testing::write_file(empty_dir / "empty.jsonl", "\n\n");
  InstanceStream empty(empty_dir / "empty.jsonl", kShape, StreamShard{4, 0, 4}, StreamPosition{},
                       2);
  EXPECT_THROW(empty.next(c10::Device(c10::kCPU)), DataError);
}

TEST(PretrainStreaming, GradcheckStrategiesAndAccumulationOnTheStream) {
  TempDir out;
  const auto result =
      run_bertlab({"gradcheck", data_path("experiments/pretrain.toml").string(), "--steps", "2",
                   "--set", "task.streaming=true", "--output-dir", out.path().string()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.err.find("streaming training instances"), std::string::npos) << result.err;
  EXPECT_NE(result.out.find("| mirrored-2-accumulate-2 | contract | exact |"), std::string::npos)
      << result.out;
}

TEST(PretrainStreaming, ThreeStepsThenResumeEqualSixStraight) {
  TempDir dir;
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "run",          data_path("experiments/pretrain.toml").string(),
        "--variant",    "mirrored-2",
        "--set",        "task.streaming=true",
        "--set",        "train.num_train_steps=6",
        "--set",        "train.train_batch_size=12",
        "--output-dir", dir.path().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_bertlab(args);
  };
  const fs::path variant = dir / "pretrain" / "mirrored-2";
  auto plain = run({});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string plain_metrics = without_timings(variant / "metrics.jsonl");
  const std::string plain_model = read_file(variant / "model.safetensors");
  fs::remove_all(dir / "pretrain");

  auto first = run({"--set", "train.save_checkpoints_steps=3"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // 3 steps of 12: the stream stands at instance 36 of the first pass.
  const auto state =
      nlohmann::json::parse(read_file(variant / "checkpoints/step-000003/state.json"));
  const StreamPosition at =
      StreamPosition::from_text(state.at("data_position").get<std::string>(), "state.json");
  EXPECT_EQ(at.instances, 36);
  EXPECT_EQ(at.pass, 0);
  fs::remove_all(variant / "checkpoints/step-000006");
  fs::remove(variant / "model.safetensors");

  auto resumed = run({"--set", "train.save_checkpoints_steps=3", "--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("(step 3)"), std::string::npos) << resumed.err;
  EXPECT_EQ(without_timings(variant / "metrics.jsonl"), plain_metrics);
  EXPECT_EQ(read_file(variant / "model.safetensors"), plain_model);
}

TEST(PretrainStreaming, WithoutNumTrainStepsIsAConfigError) {
  TempDir out;
  const auto result = run_bertlab({"run", data_path("experiments/pretrain.toml").string(),
                                   "--variant", "single", "--set", "task.streaming=true", "--set",
                                   "train.num_train_steps=0", "--output-dir", out.path().string()});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("train.num_train_steps"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace bertlab::pretrain
