// Per-example dropout masks ([model] dropout_rng = "per_example"): the generator's keys, and the
// real executable showing that with dropout on one device, thread ranks, process ranks and
// gradient accumulation give the same update for the classifier, SQuAD and pretraining tasks.
#include <ATen/ATen.h>
#include <bertlab/random.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::read_jsonl;
using testing::run_bertlab;
using testing::TempDir;

DropoutKey key(int64_t first_example, int64_t examples, int64_t step = 3, uint64_t seed = 12345) {
  return DropoutKey{seed, step, first_example, examples};
}

TEST(DropoutMask, AnExampleGetsTheSameMaskInAnyShardOfTheGlobalBatch) {
  // Examples 4 and 5 of a global batch of 8: on one device, on replica 2 of 4 (a shard of 2
  // starting at 4), and in the third micro-batch of 4 with two replicas (a shard of 1 at 5).
  const at::Tensor whole = per_example_dropout_mask(key(0, 8), 2, {8, 5, 6}, 0.1);
  const at::Tensor shard = per_example_dropout_mask(key(4, 2), 2, {2, 5, 6}, 0.1);
  const at::Tensor one = per_example_dropout_mask(key(5, 1), 2, {1, 5, 6}, 0.1);
  EXPECT_TRUE(at::equal(whole.slice(0, 4, 6), shard));
  EXPECT_TRUE(at::equal(whole.slice(0, 5, 6), one));
  // Examples-major leading dimension (attention probabilities, [batch * heads, seq, seq]).
  const at::Tensor heads = per_example_dropout_mask(key(0, 8), 1, {16, 3, 3}, 0.1);
  const at::Tensor heads_shard = per_example_dropout_mask(key(6, 2), 1, {4, 3, 3}, 0.1);
  EXPECT_TRUE(at::equal(heads.slice(0, 12, 16), heads_shard));
}

TEST(DropoutMask, MasksDifferAcrossStepsSitesExamplesAndSeeds) {
  const at::Tensor base = per_example_dropout_mask(key(0, 2), 0, {2, 4096}, 0.5);
  EXPECT_FALSE(at::equal(base, per_example_dropout_mask(key(0, 2, 4), 0, {2, 4096}, 0.5)));
  EXPECT_FALSE(at::equal(base, per_example_dropout_mask(key(0, 2), 1, {2, 4096}, 0.5)));
  EXPECT_FALSE(at::equal(base, per_example_dropout_mask(key(0, 2, 3, 7), 0, {2, 4096}, 0.5)));
  EXPECT_FALSE(at::equal(base[0], base[1]));  // two examples of one batch
  EXPECT_TRUE(at::equal(base, per_example_dropout_mask(key(0, 2), 0, {2, 4096}, 0.5)));
}

TEST(DropoutMask, KeepsOneMinusPWithinBinomialBoundsAndScalesByItsInverse) {
  for (const double p : {0.1, 0.5}) {
    const int64_t n = 1000000;
    const at::Tensor mask = per_example_dropout_mask(key(0, 10), 0, {10, n / 10}, p);
    const auto scale = static_cast<float>(1.0 / (1.0 - p));
    const int64_t kept = mask.eq(scale).sum().item<int64_t>();
    EXPECT_EQ(kept + mask.eq(0.0f).sum().item<int64_t>(), n) << "values other than 0 and 1/(1-p)";
    // Six standard deviations of Binomial(n, 1 - p).
    const double sd = std::sqrt(static_cast<double>(n) * p * (1.0 - p));
    EXPECT_NEAR(static_cast<double>(kept), static_cast<double>(n) * (1.0 - p), 6.0 * sd) << p;
  }
}

TEST(DropoutMask, DropoutInAScopeNumbersItsSitesAndEvalDrawsNothing) {
  const at::Tensor x = at::ones({4, 8, 16});
  PerExampleDropoutScope scope(key(0, 4));
  EXPECT_TRUE(bertlab::dropout(x, 0.1, /*train=*/false).is_same(x));  // eval: no draw, no site
  const at::Tensor first = bertlab::dropout(x, 0.1, true);
  const at::Tensor second = bertlab::dropout(x, 0.1, true);
  EXPECT_TRUE(at::equal(first, per_example_dropout_mask(key(0, 4), 0, {4, 8, 16}, 0.1)));
  EXPECT_TRUE(at::equal(second, per_example_dropout_mask(key(0, 4), 1, {4, 8, 16}, 0.1)));
  EXPECT_EQ(scope.next_site(), 2);
  // A first dimension that is not the examples is refused.
  EXPECT_THROW(bertlab::dropout(at::ones({3, 8}), 0.1, true), std::exception);
}

// The tensor-operation form (how CUDA tensors get their masks) gives the bits of the Philox
// engine, here on the CPU: sizes that are not multiples of 4, a seed using all 64 bits, a late
// step and example.
TEST(DropoutMask, TensorOperationsGiveThePhiloxEnginesBits) {
  const DropoutKey keys[] = {key(0, 3), key(4, 2, 7, 0xfedcba9876543210ULL),
                             key(100000, 1, 123456, 1)};
  for (const DropoutKey& k : keys) {
    for (const double p : {0.1, 0.5, 0.9}) {
      for (const std::vector<int64_t>& per : {std::vector<int64_t>{5, 7}, {1}, {2, 3, 4}}) {
        std::vector<int64_t> shape = {k.examples};
        shape.insert(shape.end(), per.begin(), per.end());
        const at::Tensor engine = per_example_dropout_mask(k, 5, shape, p);
        const at::Tensor ops = per_example_dropout_mask_by_tensor_ops(k, 5, shape, p, at::kCPU);
        EXPECT_TRUE(at::equal(engine, ops)) << "seed " << k.seed << " p " << p << " " << shape;
      }
    }
  }
}

// With a GPU (scripts/gpu-check.sh): dropout of a CUDA tensor inside a scope uses the CPU's
// masks bit for bit.
TEST(DropoutMask, CudaMasksAreTheCpuMasksBitForBit) {
  if (!at::hasCUDA()) {
    GTEST_SKIP() << "no CUDA device (this libtorch or machine has none; scripts/gpu-check.sh "
                    "runs this test on a GPU machine)";
  }
  const at::Tensor x = at::ones({4, 2, 33, 33});
  PerExampleDropoutScope scope(key(8, 4));
  const at::Tensor on_device = bertlab::dropout(x.to(at::kCUDA), 0.1, true).cpu();
  EXPECT_TRUE(at::equal(on_device, per_example_dropout_mask(key(8, 4), 0, x.sizes(), 0.1)));
}

// Runs gradcheck of the task's dropout experiment on the thread-rank variants; every variant
// meets its expectation, and the per-replica masks are named as the cause of their difference.
void expect_thread_ranks_match(const std::string& task) {
  TempDir dir;
  const std::string file = data_path("experiments/dropout_" + task + ".toml").string();
  std::vector<std::string> args = {"gradcheck", file, "--output-dir", dir.path().string()};
  const std::vector<std::string> variants = {"single",
                                             "mirrored-2",
                                             "sparse-allgather-2",
                                             "mirrored-4",
                                             "sparse-allgather-4",
                                             "accumulate-2",
                                             "accumulate-4",
                                             "mirrored-2-accumulate-2",
                                             "mirrored-4-replica-dropout"};
  for (const auto& v : variants) {
    args.push_back("--variant");
    args.push_back(v);
  }
  const auto r = run_bertlab(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto json = nlohmann::json::parse(read_file(dir / ("dropout-" + task) / "gradcheck.json"));
  for (const auto& v : variants) {
    const bool replica = v == "mirrored-4-replica-dropout";
    EXPECT_EQ(json["variants"][v]["match"].get<bool>(), !replica) << task << " " << v;
    EXPECT_EQ(json["variants"][v]["result"], "PASS") << task << " " << v;
  }
  const auto causes = json["variants"]["mirrored-4-replica-dropout"]["causes"];
  ASSERT_FALSE(causes.empty()) << r.out;
  EXPECT_NE(causes[0].get<std::string>().find("dropout_rng = \"replica\" with dropout 0.1"),
            std::string::npos)
      << causes;
  EXPECT_TRUE(json["variants"]["mirrored-4"]["causes"].empty()) << json["variants"]["mirrored-4"];
  EXPECT_NE(r.out.find("Notes:"), std::string::npos) << r.out;
}

// Two processes through `bertlab launch` against one device.
void expect_process_ranks_match(const std::string& task) {
  TempDir dir;
  const std::string file = data_path("experiments/dropout_" + task + ".toml").string();
  const auto r = run_bertlab({"launch", "--nproc", "2", "--", BERTLAB_EXECUTABLE, "gradcheck", file,
                              "--variant", "single", "--variant", "env-2", "--output-dir",
                              dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto json = nlohmann::json::parse(read_file(dir / ("dropout-" + task) / "gradcheck.json"));
  EXPECT_TRUE(json["variants"]["env-2"]["match"].get<bool>()) << r.out;
}

TEST(DropoutRng, ClassifierThreadRanksAndAccumulationMatchOneDevice) {
  expect_thread_ranks_match("classifier");
}
TEST(DropoutRng, SquadThreadRanksAndAccumulationMatchOneDevice) {
  expect_thread_ranks_match("squad");
}
TEST(DropoutRng, PretrainThreadRanksAndAccumulationMatchOneDevice) {
  expect_thread_ranks_match("pretrain");
}
TEST(DropoutRng, ClassifierProcessRanksMatchOneDevice) { expect_process_ranks_match("classifier"); }
TEST(DropoutRng, SquadProcessRanksMatchOneDevice) { expect_process_ranks_match("squad"); }
TEST(DropoutRng, PretrainProcessRanksMatchOneDevice) { expect_process_ranks_match("pretrain"); }

TEST(DropoutRng, OneTwoAndFourReplicasTrainTheSameLossCurve) {
  TempDir dir;
  const auto r = run_bertlab({"run", data_path("experiments/dropout_classifier.toml").string(),
                              "--variant", "single", "--variant", "mirrored-2", "--variant",
                              "mirrored-4", "--output-dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto losses = [&](const std::string& variant) {
    std::vector<double> out;
    for (const auto& line : read_jsonl(dir / "dropout-classifier" / variant / "metrics.jsonl")) {
      out.push_back(line["loss"].get<double>());
    }
    return out;
  };
  const std::vector<double> one = losses("single");
  ASSERT_EQ(one.size(), 20u);
  for (const char* variant : {"mirrored-2", "mirrored-4"}) {
    const std::vector<double> other = losses(variant);
    ASSERT_EQ(other.size(), one.size()) << variant;
    for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(other[i], one[i], 1e-5) << variant << i;
  }
  // Dropout did act: the loss curve is not that of the same run without dropout.
  TempDir off;
  const auto r0 =
      run_bertlab({"run", data_path("experiments/dropout_classifier.toml").string(), "--variant",
                   "single", "--output-dir", off.path().string(), "--set",
                   "model.hidden_dropout_prob=0", "--set", "model.attention_probs_dropout_prob=0"});
  ASSERT_EQ(r0.exit_code, 0) << r0.err;
  const auto plain = read_jsonl(off / "dropout-classifier" / "single" / "metrics.jsonl");
  EXPECT_GT(std::abs(plain.back()["loss"].get<double>() - one.back()), 1e-4);
}

TEST(DropoutRng, AFailRowOfReplicaMasksNamesTheCause) {
  std::string text = read_file(data_path("experiments/dropout_classifier.toml"));
  const std::string marker = "model.dropout_rng = \"replica\"\nexpect = \"differ\"";
  const size_t at = text.find(marker);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, marker.size(), "model.dropout_rng = \"replica\"\nexpect = \"match\"");
  // Beside the original, so its relative paths resolve.
  const fs::path copy =
      data_path("experiments") / ("dropout-copy-" + std::to_string(::getpid()) + ".toml");
  testing::write_file(copy, text);
  TempDir dir;
  const auto r = run_bertlab({"gradcheck", copy.string(), "--variant", "single", "--variant",
                              "mirrored-4-replica-dropout", "--output-dir", dir.path().string()});
  fs::remove(copy);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("| FAIL: likely dropout_rng = \"replica\" with dropout 0.1: masks differ by "
                       "replica count (4 replicas vs 1 replica); use \"per_example\" |"),
            std::string::npos)
      << r.out;
  // Said before training, too.
  EXPECT_NE(r.err.find("variant 'mirrored-4-replica-dropout', besides the averaging, differs from "
                       "the reference 'single' in: dropout_rng = \"replica\""),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace bertlab
