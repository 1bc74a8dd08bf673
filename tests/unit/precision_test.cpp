// Mixed precision: the dynamic loss scaler's rule (as torch.amp.GradScaler), bf16 autocast and
// loss scaling through the real executable against fp32, and the configuration rules.

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "train/precision.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::read_jsonl;
using testing::run_bertlab;
using testing::TempDir;

PrecisionOptions scaled(double init, double growth, double backoff, int64_t interval) {
  PrecisionOptions o;
  o.dynamic_loss_scaling = true;
  o.init_scale = init;
  o.growth_factor = growth;
  o.backoff_factor = backoff;
  o.growth_interval = interval;
  return o;
}

// GradScaler's rule: back off at once on a non-finite step (and restart the count), grow after
// growth_interval finite steps in a row.
TEST(Precision, LossScalerBacksOffAtOnceAndGrowsAfterTheInterval) {
  LossScaler s(scaled(1024, 2, 0.5, 3));
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);  // the two finite steps no longer count
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.growth_tracker(), 0);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 512);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.growth_tracker(), 0);
  s.restore(8, 2);
  s.update(true);
  EXPECT_EQ(s.scale(), 16);

  PrecisionOptions off;  // fp32 without scaling: scale 1, updates change nothing
  LossScaler none(off);
  EXPECT_FALSE(none.enabled());
  none.update(false);
  EXPECT_EQ(none.scale(), 1.0);
}

fs::path mixed_precision_experiment() {
  return fs::path(BERTLAB_SOURCE_DIR) / "experiments" / "mixed-precision.toml";
}

// A power-of-two loss scale loses nothing: the scaled fp32 variant equals fp32 bit for bit.
// bf16 autocast (single and 2 replicas) stays within the tolerance its variant states, and is
// not bitwise fp32 (autocast did run).
TEST(Precision, Bf16AndLossScalingAgainstFp32InGradcheck) {
  TempDir dir;
  auto r = run_bertlab(
      {"gradcheck", mixed_precision_experiment().string(), "--output-dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto json = nlohmann::json::parse(read_file(dir.path() / "mixed-precision/gradcheck.json"));
  const auto& v = json["variants"];
  const auto& scaled_row = v["fp32-loss-scaled"];
  EXPECT_TRUE(scaled_row["match"].get<bool>());
  EXPECT_EQ(scaled_row["dense_grad"]["max_abs"].get<double>(), 0.0) << scaled_row.dump();
  EXPECT_EQ(scaled_row["params"]["max_abs"].get<double>(), 0.0) << scaled_row.dump();
  for (const char* name : {"bf16", "bf16-mirrored-2"}) {
    EXPECT_TRUE(v[name]["match"].get<bool>()) << name << ": " << v[name].dump();
    EXPECT_GT(v[name]["dense_grad"]["max_abs"].get<double>(), 0.0) << name;
  }
}

// Dynamic scaling in a real run: a first scale of 2^140 overflows fp32, so step 1 is skipped
// and counted and the scale backs off to 2^20; it then doubles after every 2 finite steps.
TEST(Precision, DynamicLossScaleSkipsTheOverflowedStepAndGrows) {
  TempDir dir;
  auto r = run_bertlab({"run", data_path("experiments/resume.toml").string(), "--output-dir",
                        dir.path().string(), "--set", "train.save_checkpoints_steps=0", "--set",
                        "train.log_every_steps=1", "--set", "train.loss_scaling=\"dynamic\"",
                        "--set", "train.loss_scale_init=1.393796574908164e42", "--set",
                        "train.loss_scale_backoff_factor=7.52316384526264e-37", "--set",
                        "train.loss_scale_growth_interval=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("step 1: the gradient overflowed at loss scale"), std::string::npos)
      << r.err;
  auto lines = read_jsonl(dir.path() / "resume/default/metrics.jsonl");
  ASSERT_EQ(lines.size(), 6u);
  const double expected_scale[6] = {std::ldexp(1.0, 20), std::ldexp(1.0, 20), std::ldexp(1.0, 21),
                                    std::ldexp(1.0, 21), std::ldexp(1.0, 22), std::ldexp(1.0, 22)};
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["skipped_steps"].get<int64_t>(), 1) << i;
    EXPECT_DOUBLE_EQ(lines[i]["loss_scale"].get<double>(), expected_scale[i]) << i;
    // The skipped step logs no loss and no norm (null); every later one a finite norm.
    if (i == 0) {
      EXPECT_TRUE(lines[i]["grad_norm"].is_null()) << lines[i].dump();
    } else {
      EXPECT_TRUE(std::isfinite(lines[i]["grad_norm"].get<double>())) << lines[i].dump();
    }
  }
}

TEST(Precision, Fp16NeedsACudaDevice) {
  auto r = run_bertlab({"validate", data_path("experiments/resume.toml").string(), "--set",
                        "train.precision=\"fp16\""});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("train.precision: 'fp16' needs a CUDA device, and [strategy] device is "
                       "\"cpu\"; use precision = \"bf16\" on CPU"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace bertlab
