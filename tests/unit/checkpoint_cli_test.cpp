// Checkpoints through the real executable: convert and inspect of both published tiny
// checkpoints (read back by an independent path), fine-tuning from a converted checkpoint in an
// experiment file, resumable training (6 steps straight = 3 + resume + 3), keep_checkpoint_max,
// and the errors a user meets.

#include <ATen/ATen.h>
#include <bertlab/io/checkpoint.h>
#include <bertlab/io/safetensors.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;
using testing::without_timings;

fs::path tiny_tf() { return data_path("checkpoints/tiny-tf/bert_model.ckpt"); }
fs::path tiny_pytorch() { return data_path("checkpoints/tiny-pytorch/pytorch_model.bin"); }
fs::path resume_experiment() { return data_path("experiments/resume.toml"); }

/// Reads a safetensors file without bertlab's reader: the header with nlohmann, each tensor's
/// raw bytes from its offsets.
std::map<std::string, std::string> raw_safetensors(const fs::path& path, nlohmann::json* header) {
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  *header = nlohmann::json::parse(bytes.substr(8, n));
  std::map<std::string, std::string> out;
  for (const auto& [name, info] : header->items()) {
    if (name == "__metadata__") continue;
    const uint64_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
    out[name] = bytes.substr(8 + n + begin, end - begin);
  }
  return out;
}

std::string bytes_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

TEST(Convert, TheTinyTfCheckpointBecomesHuggingFaceSafetensors) {
  TempDir dir;
  auto r = run_bertlab(
      {"convert", "--from", tiny_tf().string(), "--to", (dir / "tf.safetensors").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("46 tensors, hf names"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipped 92 optimizer slot"), std::string::npos) << r.out;
  nlohmann::json header;
  const auto raw = raw_safetensors(dir / "tf.safetensors", &header);
  EXPECT_EQ(raw.size(), 46u);
  const auto config =
      nlohmann::json::parse(header["__metadata__"]["bert_config"].get<std::string>());
  EXPECT_EQ(config["hidden_size"], 4);
  // Against the TF checkpoint as read by the TF reader: a kernel transposed, an embedding as is.
  std::map<std::string, at::Tensor> tf;
  for (auto& [name, t] : read_checkpoint(tiny_tf()).tensors) tf[name] = t;
  EXPECT_EQ(raw.at("bert.encoder.layer.1.output.dense.weight"),
            bytes_of(tf.at("bert/encoder/layer_1/output/dense/kernel").t()));
  EXPECT_EQ(header["bert.encoder.layer.1.output.dense.weight"]["shape"],
            nlohmann::json::array({4, 16}));
  EXPECT_EQ(raw.at("bert.embeddings.word_embeddings.weight"),
            bytes_of(tf.at("bert/embeddings/word_embeddings")));
  EXPECT_EQ(raw.at("cls.predictions.bias"), bytes_of(tf.at("cls/predictions/output_bias")));
}

TEST(Convert, TheTinyPytorchCheckpointRoundTripsThroughGoogleNames) {
  TempDir dir;
  const std::string hf = (dir / "hf.safetensors").string();
  const std::string google = (dir / "google.safetensors").string();
  const std::string back = (dir / "back.safetensors").string();
  ASSERT_EQ(run_bertlab({"convert", "--from", tiny_pytorch().string(), "--to", hf}).exit_code, 0);
  auto r = run_bertlab({"convert", "--from", hf, "--to", google, "--names", "google"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(run_bertlab({"convert", "--from", google, "--to", back}).exit_code, 0);
  nlohmann::json h1, h2, hg;
  const auto first = raw_safetensors(hf, &h1);
  const auto last = raw_safetensors(back, &h2);
  const auto as_google = raw_safetensors(google, &hg);
  EXPECT_EQ(first.size(), 23u);  // 24 stored, less the position_ids buffer
  EXPECT_EQ(first, last);        // bitwise, every tensor
  EXPECT_TRUE(as_google.count("bert/encoder/layer_0/attention/self/query/kernel"));
  EXPECT_TRUE(as_google.count("output_weights"));  // the classifier head, as run_classifier.py
  // The PyTorch reader agrees with the bytes converted.
  for (auto& [name, t] : read_checkpoint(tiny_pytorch()).tensors) {
    if (first.count(name) != 0) {
      EXPECT_EQ(first.at(name), bytes_of(t)) << name;
    }
  }
}

TEST(Inspect, PrintsTheTensorsOfEveryFormat) {
  auto tf = run_bertlab({"inspect", tiny_tf().string()});
  ASSERT_EQ(tf.exit_code, 0) << tf.err;
  EXPECT_NE(tf.out.find("tensorflow, 139 tensors"), std::string::npos) << tf.out;
  EXPECT_NE(tf.out.find("bert/encoder/layer_0/intermediate/dense/kernel"), std::string::npos);
  auto pt = run_bertlab({"inspect", tiny_pytorch().string(), "--stats"});
  ASSERT_EQ(pt.exit_code, 0) << pt.err;
  EXPECT_NE(pt.out.find("pytorch, 24 tensors"), std::string::npos) << pt.out;
  EXPECT_NE(pt.out.find("[402, 16]  mean"), std::string::npos) << pt.out;
}

TEST(Inspect, CorruptFilesAreClearErrors) {
  TempDir dir;
  const std::string bytes = read_file(tiny_pytorch());
  testing::write_file(dir / "truncated.bin", bytes.substr(0, bytes.size() / 2));
  auto r = run_bertlab({"inspect", (dir / "truncated.bin").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("truncated.bin"), std::string::npos) << r.err;
  auto hostile = run_bertlab({"inspect", data_path("checkpoints/hostile/foreign_global.bin")});
  EXPECT_EQ(hostile.exit_code, 1);
  EXPECT_NE(hostile.err.find("system"), std::string::npos) << hostile.err;
}

TEST(FineTune, TheConvertedCheckpointTrainsInTheExperimentFile) {
  TempDir dir;
  const std::string converted = (dir / "tiny.safetensors").string();
  ASSERT_EQ(run_bertlab({"convert", "--from", tiny_tf().string(), "--to", converted}).exit_code, 0);
  auto r = run_bertlab(
      {"run", (fs::path(BERTLAB_SOURCE_DIR) / "experiments/finetune-from-checkpoint.toml").string(),
       "--variant", "from-safetensors", "--set", "model.init_checkpoint=" + converted,
       "--output-dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path out = dir / "finetune-from-checkpoint/from-safetensors";
  const auto report = nlohmann::json::parse(read_file(out / "init_report.json"));
  EXPECT_EQ(report["format"], "safetensors");
  EXPECT_EQ(report["loaded"].size(), 39u);
  EXPECT_EQ(report["missing"], nlohmann::json::array({"classifier.bias", "classifier.weight"}));
  EXPECT_TRUE(fs::is_regular_file(out / "eval_results.json"));
  // Training moved the loaded weights.
  std::map<std::string, at::Tensor> start, end;
  for (auto& [n, t] : read_safetensors(converted)) start[n] = t;
  for (auto& [n, t] : read_safetensors(out / "model.safetensors")) end[n] = t;
  EXPECT_FALSE(at::equal(start.at("bert.encoder.layer.0.output.dense.weight"),
                         end.at("bert.encoder.layer.0.output.dense.weight")));
}

TEST(FineTune, ACheckpointThatIsNoCheckpointStopsValidation) {
  TempDir dir;
  testing::write_file(dir / "weights.txt", "hello\n");
  auto r = run_bertlab({"validate", resume_experiment().string(), "--set",
                        "model.init_checkpoint=" + (dir / "weights.txt").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("model.init_checkpoint: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a checkpoint bertlab reads"), std::string::npos) << r.err;
}

TEST(FineTune, TheTinyPytorchVocabularyLongerThanItsVocabSizeIsNamed) {
  // Its vocab.txt has 405 tokens, config.json says 402: ids 402..404 would index past the table.
  auto r = run_bertlab(
      {"validate", resume_experiment().string(), "--set",
       "model.bert_config_file=" + data_path("checkpoints/tiny-pytorch/config.json").string(),
       "--set", "model.vocab_file=" + data_path("checkpoints/tiny-pytorch/vocab.txt").string(),
       "--set", "model.init_checkpoint=" + tiny_pytorch().string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("has 405 tokens but bert_config vocab_size is 402"), std::string::npos)
      << r.err;
}

class Resume : public ::testing::Test {
 protected:
  testing::CommandResult run(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"run", resume_experiment().string(), "--output-dir",
                                     dir_.path().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_bertlab(args);
  }
  fs::path out(const std::string& rel) const { return dir_ / ("resume/default/" + rel); }
  void expect_resume_equals_straight(const std::vector<std::string>& optimizer);
  TempDir dir_;
};

// 3 steps, a checkpoint, a resumed run of 3 more: the same metrics and weights as 6 straight,
// for every optimizer (their slots, step counts and schedules travel in the checkpoint), and\n//
// with thread ranks.
void Resume::expect_resume_equals_straight(const std::vector<std::string>& optimizer) {
  SCOPED_TRACE(optimizer.empty() ? "adam_weight_decay" : optimizer[1]);
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), optimizer.begin(), optimizer.end());
    return run(args);
  };
  // Straight through, without checkpoints.
  auto plain = with({"--set", "train.save_checkpoints_steps=0"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string plain_metrics = without_timings(out("metrics.jsonl"));
  const std::string plain_model = read_file(out("model.safetensors"));
  fs::remove_all(dir_ / "resume");

  // With a checkpoint every 3 steps; then step 6's is gone as if the run died after step 3.
  auto first = with({});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(without_timings(out("metrics.jsonl")), plain_metrics);
  ASSERT_TRUE(fs::is_directory(out("checkpoints/step-000003")));
  fs::remove_all(out("checkpoints/step-000006"));
  fs::remove(out("metrics.jsonl"));
  fs::remove(out("model.safetensors"));

  auto resumed = with({"--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming from"), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("(step 3)"), std::string::npos) << resumed.err;
  EXPECT_EQ(without_timings(out("metrics.jsonl")), plain_metrics);
  std::map<std::string, at::Tensor> a, b;
  for (auto& [n, t] : read_safetensors(out("model.safetensors"))) a[n] = t;
  TempDir tmp;
  testing::write_file(tmp / "plain.safetensors", plain_model);
  for (auto& [n, t] : read_safetensors(tmp / "plain.safetensors")) b[n] = t;
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [n, t] : a) EXPECT_TRUE(at::equal(t, b.at(n))) << n;
  fs::remove_all(dir_ / "resume");
}

TEST_F(Resume, ThreeStepsThenResumeEqualSixStraight) {
  expect_resume_equals_straight({});
  expect_resume_equals_straight({"--set", "optimizer.plugin=\"lamb\""});
  expect_resume_equals_straight(
      {"--set", "optimizer.plugin=\"adamw\"", "--set", "optimizer.amsgrad=true"});
  expect_resume_equals_straight({"--set", "optimizer.plugin=\"sgd\"", "--set",
                                 "optimizer.momentum=0.9", "--set", "optimizer.dampening=0.5"});
  // Two thread ranks with per-example masks (keyed by the global step, so a resumed run draws
  // the masks of the steps it continues).
  expect_resume_equals_straight(
      {"--set", "strategy.plugin=\"mirrored\"", "--set", "strategy.replicas=2"});
  // Two thread ranks, each drawing its dropout from its own generator, saved with the state.
  expect_resume_equals_straight({"--set", "strategy.plugin=\"mirrored\"", "--set",
                                 "strategy.replicas=2", "--set", "model.dropout_rng=\"replica\""});
}

// Strategies with state: PowerSGD's residuals and warm-started Q differ per rank; local SGD's
// replicas hold their own parameters and Adam moments between synchronisations (period 3 from
// step 1: the checkpoint after step 3 falls between two). ranks.safetensors carries them.
TEST_F(Resume, StrategyStatePerRankResumesExactly) {
  expect_resume_equals_straight({"--set", "strategy.plugin=\"powersgd\"", "--set",
                                 "strategy.replicas=2", "--set", "strategy.start_step=1"});
  expect_resume_equals_straight({"--set", "strategy.plugin=\"local_sgd\"", "--set",
                                 "strategy.replicas=2", "--set", "strategy.start_step=1", "--set",
                                 "strategy.period=3"});
}

// zero1: each rank holds its shard of the Adam moments; the checkpoint gathers the whole state
// (the same tensors a mirrored run saves), and a resumed run takes each rank's shard back.
TEST_F(Resume, Zero1ShardedOptimizerStateResumesExactly) {
  expect_resume_equals_straight(
      {"--set", "strategy.plugin=\"zero1\"", "--set", "strategy.replicas=2"});
  expect_resume_equals_straight({"--set", "strategy.plugin=\"zero1\"", "--set",
                                 "strategy.replicas=2", "--set", "optimizer.plugin=\"lamb\""});
  std::map<std::string, std::map<std::string, at::Tensor>> saved;
  for (const std::string strategy : {"zero1", "mirrored"}) {
    auto r = run({"--set", "strategy.plugin=\"" + strategy + "\"", "--set", "strategy.replicas=2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (auto& [n, t] : read_safetensors(out("checkpoints/step-000003/optimizer.safetensors"))) {
      saved[strategy][n] = t;
    }
    fs::remove_all(dir_ / "resume");
  }
  ASSERT_EQ(saved["zero1"].size(), saved["mirrored"].size());
  ASSERT_GT(saved["zero1"].size(), 0U);
  for (const auto& [n, t] : saved["mirrored"]) {
    ASSERT_EQ(saved["zero1"].count(n), 1U) << n;
    EXPECT_TRUE(at::allclose(saved["zero1"].at(n), t, 1e-5, 1e-7)) << n;
  }
}

TEST_F(Resume, KeepCheckpointMaxKeepsTheNewest) {
  // A half-written checkpoint from an interrupted write is neither listed nor resumed from.
  fs::create_directories(out("checkpoints/.tmp-step-000009.1"));
  auto r = run({"--set", "train.save_checkpoints_steps=1", "--set", "train.keep_checkpoint_max=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(out("checkpoints"))) {
    kept.push_back(e.path().filename().string());
  }
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{".tmp-step-000009.1", "step-000005", "step-000006"}));
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json",
                           "metrics.jsonl", "resolved.toml"}) {
    EXPECT_TRUE(fs::is_regular_file(out(std::string("checkpoints/step-000006/") + file))) << file;
  }
  // Resuming after the last step trains no more and writes the outputs again.
  auto again = run({"--resume"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("(step 6)"), std::string::npos) << again.err;
}

TEST_F(Resume, AChangedBatchSizeOrModelIsRefused) {
  ASSERT_EQ(run({}).exit_code, 0);
  auto r = run(
      {"--resume", "--set", "train.train_batch_size=4", "--set", "model.hidden_dropout_prob=0.2"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("train.train_batch_size: 8 in the checkpoint, 4 now"), std::string::npos)
      << r.err;
  // A change that does not matter is only a warning.
  auto warned = run({"--resume", "--set", "model.hidden_dropout_prob=0.2"});
  EXPECT_EQ(warned.exit_code, 0) << warned.err;
  EXPECT_NE(warned.err.find("model.hidden_dropout_prob: 0.1 in the checkpoint, 0.2 now"),
            std::string::npos)
      << warned.err;
}

TEST_F(Resume, WithoutACheckpointTheRunStartsAtStepZero) {
  auto r = run({"--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no checkpoint"), std::string::npos) << r.err;
  EXPECT_EQ(testing::read_jsonl(out("metrics.jsonl")).size(), 3u);
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

// A learning rate of 1e30 blows the weights up after the second step, and the third step's loss
// is NaN: by default the run stops naming the step; with on_nonfinite = "skip_step" the updates
// of such steps are skipped and counted, and the run finishes.
TEST_F(Resume, ANonFiniteLossStopsTheRunOrIsSkippedAndCounted) {
  auto stopped = run({"--set", "optimizer.learning_rate=1e30"});
  EXPECT_EQ(stopped.exit_code, 1) << stopped.err;
  EXPECT_NE(stopped.err.find("[train] step 3: the loss is nan"), std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find("on_nonfinite"), std::string::npos) << stopped.err;

  auto skipped = run({"--set", "optimizer.learning_rate=1e30", "--set",
                      "train.on_nonfinite=\"skip_step\"", "--set", "train.log_every_steps=1"});
  ASSERT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_NE(skipped.err.find("step 3: the loss is nan; update skipped (1 so far)"),
            std::string::npos)
      << skipped.err;
  const auto lines = testing::read_jsonl(out("metrics.jsonl"));
  ASSERT_EQ(lines.size(), 6U);
  EXPECT_EQ(lines[1]["skipped_steps"], 0);
  EXPECT_TRUE(lines[1]["loss"].is_number());
  EXPECT_EQ(lines.back()["skipped_steps"], 4);
  EXPECT_TRUE(lines.back()["loss"].is_null());  // every step of the window was skipped
  // The skipped updates left the weights as step 2 made them: large, but finite.
  for (const auto& [name, t] : read_safetensors(out("model.safetensors"))) {
    EXPECT_TRUE(at::isfinite(t).all().item<bool>()) << name;
  }
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

size_t lines_in(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  const std::string text = read_file(path);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// SIGTERM (and SIGINT) in the middle of training: the step in flight finishes, a checkpoint is
// written, the exit code is 128 + signal; --resume then ends where an uninterrupted run ends.
TEST_F(Resume, ASignalStopsAfterTheStepWithACheckpointAndResumesExactly) {
  const std::vector<std::string> longer = {"--set", "train.num_train_steps=400", "--set",
                                           "train.log_every_steps=1"};
  auto with = [&](std::vector<std::string> args) {
    std::vector<std::string> all = {"run", resume_experiment().string(), "--output-dir",
                                    dir_.path().string()};
    all.insert(all.end(), longer.begin(), longer.end());
    all.insert(all.end(), args.begin(), args.end());
    return all;
  };
  auto straight = run_bertlab(with({}));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const std::string straight_model = read_file(out("model.safetensors"));
  const std::string straight_metrics = without_timings(out("metrics.jsonl"));
  fs::remove_all(dir_ / "resume");

  for (const int signal : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(signal == SIGTERM ? "SIGTERM" : "SIGINT");
    const fs::path partial = out("metrics.jsonl.partial");
    auto stopped =
        testing::run_bertlab_signalled(with({}), signal, [&] { return lines_in(partial) >= 20; });
    ASSERT_EQ(stopped.exit_code, 128 + signal) << stopped.err;
    EXPECT_NE(stopped.err.find("stopped after step"), std::string::npos) << stopped.err;
    EXPECT_NE(stopped.err.find("--resume"), std::string::npos) << stopped.err;
    EXPECT_FALSE(fs::exists(out("model.safetensors")));
    auto resumed = run_bertlab(with({"--resume"}));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(resumed.err.find("resuming from"), std::string::npos) << resumed.err;
    EXPECT_EQ(read_file(out("model.safetensors")), straight_model);
    EXPECT_EQ(without_timings(out("metrics.jsonl")), straight_metrics);
    fs::remove_all(dir_ / "resume");
  }
}

}  // namespace
}  // namespace bertlab
