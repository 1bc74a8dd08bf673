// Crash safety of `bertlab run`: killed with SIGKILL at random moments, or stopped by a full
// disk, a run never leaves a corrupt result or checkpoint, and --resume ends exactly where an
// uninterrupted run ends (threads = 1, so every step is bitwise reproducible).

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;
using testing::without_timings;

class CrashSafety : public ::testing::Test {
 protected:
  /// `bertlab run` of resume.toml (the tiny TF checkpoint on 32 MRPC examples, dropout on)
  /// for `steps` steps with a checkpoint after every step, two kept.
  std::vector<std::string> args(int steps, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> all = {
        "run",          data_path("experiments/resume.toml").string(),
        "--output-dir", dir_.path().string(),
        "--set",        "train.num_train_steps=" + std::to_string(steps),
        "--set",        "train.save_checkpoints_steps=1",
        "--set",        "train.keep_checkpoint_max=2",
        "--set",        "train.log_every_steps=1"};
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  }
  fs::path out(const std::string& rel) const { return dir_ / ("resume/default/" + rel); }
  /// The checkpoint folders of the run, by name.
  std::map<std::string, std::map<std::string, std::string>> checkpoints() const {
    std::map<std::string, std::map<std::string, std::string>> found;
    if (!fs::is_directory(out("checkpoints"))) return found;
    for (const auto& d : fs::directory_iterator(out("checkpoints"))) {
      const std::string name = d.path().filename().string();
      if (name.rfind("step-", 0) != 0) continue;
      for (const auto& f : fs::directory_iterator(d.path())) {
        found[name][f.path().filename().string()] = read_file(f.path());
      }
    }
    return found;
  }
  TempDir dir_;
};

// Ten SIGKILLs at moments drawn uniformly over an uninterrupted run's duration (start-up,
// training, checkpoint writes, the final outputs): each killed run, resumed, gives the final
// weights and metrics of the uninterrupted run bit for bit.
TEST_F(CrashSafety, KilledAtTenRandomMomentsAndResumedEqualsTheUninterruptedRun) {
  constexpr int kSteps = 24;
  const auto start = Clock::now();
  auto straight = run_bertlab(args(kSteps));
  const double run_s = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const std::string straight_model = read_file(out("model.safetensors"));
  const std::string straight_metrics = without_timings(out("metrics.jsonl"));
  fs::remove_all(dir_ / "resume");

  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> moment(0.0, run_s);
  int killed = 0;
  for (int i = 0; i < 10; ++i) {
    const double at_s = moment(rng);
    SCOPED_TRACE("kill " + std::to_string(i) + " at " + std::to_string(at_s) + " s of " +
                 std::to_string(run_s));
    const auto t0 = Clock::now();
    auto victim = testing::run_bertlab_signalled(args(kSteps), SIGKILL, [&] {
      return std::chrono::duration<double>(Clock::now() - t0).count() >= at_s;
    });
    if (victim.exit_code == 128 + SIGKILL) ++killed;
    // Whatever the kill left, every checkpoint folder the resume could pick is whole.
    for (const auto& [name, files] : checkpoints()) {
      EXPECT_EQ(files.size(), 5u) << name;
    }
    auto resumed = run_bertlab(args(kSteps, {"--resume"}));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(read_file(out("model.safetensors")), straight_model);
    EXPECT_EQ(without_timings(out("metrics.jsonl")), straight_metrics);
    fs::remove_all(dir_ / "resume");
  }
  // The moments are random, but a draw where the run always finished first would test nothing.
  EXPECT_GE(killed, 5) << "most kills should land before the run ends";
}

// A write that fails as on a full disk (a file-size limit, as `ulimit -f`) stops the run with
// an error naming the file and the cause; the checkpoint written before is left intact and
// resuming from it without the limit ends where an uninterrupted run ends.
TEST_F(CrashSafety, AFullDiskIsAClearErrorAndKeepsThePreviousCheckpoint) {
  // Six steps keeping every checkpoint; then the run is put back to step 3, as if it had
  // stopped there (the schedule depends on num_train_steps, so it must be this run's).
  auto straight = run_bertlab(args(6, {"--set", "train.keep_checkpoint_max=0"}));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const std::string straight_model = read_file(out("model.safetensors"));
  const std::string straight_metrics = without_timings(out("metrics.jsonl"));
  const auto optimizer_bytes =
      static_cast<int64_t>(fs::file_size(out("checkpoints/step-000003/optimizer.safetensors")));
  for (const char* later : {"step-000004", "step-000005", "step-000006"}) {
    fs::remove_all(out("checkpoints") / later);
  }
  fs::remove(out("model.safetensors"));
  fs::remove(out("metrics.jsonl"));
  const auto before = checkpoints();
  ASSERT_EQ(before.count("step-000003"), 1u);

  // Every file smaller than the optimizer state fits: the next checkpoint cannot be written.
  auto full = testing::run_bertlab_file_limited(args(6, {"--resume"}), optimizer_bytes / 2);
  EXPECT_EQ(full.exit_code, 1) << full.err;
  EXPECT_NE(full.err.find("optimizer.safetensors"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("File too large"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("--resume"), std::string::npos) << full.err;
  const auto after = checkpoints();
  ASSERT_EQ(after.count("step-000003"), 1u);
  EXPECT_EQ(after.at("step-000003"), before.at("step-000003"));
  EXPECT_FALSE(fs::exists(out("model.safetensors")));

  auto resumed = run_bertlab(args(6, {"--resume"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("(step 3)"), std::string::npos) << resumed.err;
  EXPECT_EQ(read_file(out("model.safetensors")), straight_model);
  EXPECT_EQ(without_timings(out("metrics.jsonl")), straight_metrics);
}

}  // namespace
}  // namespace bertlab
