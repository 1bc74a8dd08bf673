// Evaluation during training ([train] eval_every_steps) and stopping at a target metric
// ([train] stop_when), through the real `bertlab` executable on the tiny end-to-end experiment
// with Google's dropout 0.1.

#include <ATen/ATen.h>
#include <bertlab/io/safetensors.h>
#include <gtest/gtest.h>

#include <map>
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

/// `bertlab run` of the end-to-end experiment's dense variant, 12 steps, dropout 0.1, `extra`
/// settings after those; the run's folder.
testing::CommandResult run_dense(const fs::path& out, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run",          data_path("experiments/overfit.toml").string(),
                                   "--variant",    "dense",
                                   "--output-dir", out.string(),
                                   "--set",        "train.num_train_steps=12",
                                   "--set",        "train.log_every_steps=2",
                                   "--set",        "model.hidden_dropout_prob=0.1",
                                   "--set",        "model.attention_probs_dropout_prob=0.1"};
  for (const auto& setting : extra) args.insert(args.end(), {"--set", setting});
  return run_bertlab(args);
}

std::vector<nlohmann::json> eval_lines(const fs::path& variant_dir) {
  std::vector<nlohmann::json> lines;
  for (const auto& line : read_jsonl(variant_dir / "metrics.jsonl")) {
    if (line.contains("eval_accuracy")) lines.push_back(line);
  }
  return lines;
}

// Every 4 steps an evaluation line in metrics.jsonl (the last step's evaluation is
// eval_results.json); the evaluations draw no random numbers, so the weights are those of the
// run without them, bit for bit.
TEST(EvalDuringTraining, EveryNStepsALineAndTheTrainingUnchanged) {
  TempDir with, without;
  const auto r = run_dense(with.path(), {"train.eval_every_steps=4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(run_dense(without.path(), {}).exit_code, 0);
  const auto evals = eval_lines(with / "overfit/dense");
  ASSERT_EQ(evals.size(), 2u);
  EXPECT_EQ(evals[0]["step"], 4);
  EXPECT_EQ(evals[1]["step"], 8);
  for (const auto& e : evals) {
    EXPECT_TRUE(e.contains("eval_loss") && e.contains("eval_f1") && e.contains("elapsed_s"));
    EXPECT_FALSE(e.contains("loss")) << e.dump();
  }
  EXPECT_NE(r.err.find("[eval] dense step 4: eval_accuracy"), std::string::npos) << r.err;
  EXPECT_TRUE(eval_lines(without / "overfit/dense").empty());
  auto a = read_safetensors(with / "overfit/dense/model.safetensors");
  auto b = read_safetensors(without / "overfit/dense/model.safetensors");
  ASSERT_EQ(a.size(), b.size());
  std::map<std::string, at::Tensor> by_name(b.begin(), b.end());
  for (const auto& [name, tensor] : a) EXPECT_TRUE(at::equal(tensor, by_name.at(name))) << name;
  EXPECT_EQ(read_file(with / "overfit/dense/eval_results.json"),
            read_file(without / "overfit/dense/eval_results.json"));
}

// The first evaluation that meets stop_when ends the training there, on every rank of a
// replicated run alike; a target never met runs every step.
TEST(EvalDuringTraining, StopWhenEndsTheTrainingAtTheFirstEvaluationThatMeetsIt) {
  TempDir met, never;
  const auto r =
      run_dense(met.path(), {"train.eval_every_steps=3", "train.stop_when=\"eval_loss <= 1000\"",
                             "strategy.plugin=\"mirrored\"", "strategy.replicas=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("stop_when eval_loss <= 1000 met after step 3 of 12"), std::string::npos)
      << r.err;
  const auto summary = nlohmann::json::parse(read_file(met / "overfit/dense/run_summary.json"));
  EXPECT_EQ(summary["steps"], 3);
  const auto lines = read_jsonl(met / "overfit/dense/metrics.jsonl");
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[lines.size() - 2]["step"], 3);  // the last step's line, then its evaluation
  EXPECT_TRUE(lines[lines.size() - 2].contains("loss"));
  EXPECT_TRUE(lines.back().contains("eval_loss"));
  EXPECT_TRUE(fs::is_regular_file(met / "overfit/dense/eval_results.json"));

  const auto all =
      run_dense(never.path(), {"train.eval_every_steps=5", "train.stop_when=\"eval_accuracy>=2\""});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(nlohmann::json::parse(read_file(never / "overfit/dense/run_summary.json"))["steps"],
            12);
  EXPECT_EQ(eval_lines(never / "overfit/dense").size(), 2u);  // steps 5 and 10
}

// A stop_when that cannot work is a configuration error (exit 2) naming the key and the value:
// before any work for its form, at the first evaluation for a metric the task does not report.
TEST(EvalDuringTraining, AStopWhenThatCannotWorkIsAConfigError) {
  TempDir dir;
  const auto form = run_dense(
      dir.path(), {"train.eval_every_steps=3", "train.stop_when=\"eval_accuracy > 0.8\""});
  EXPECT_EQ(form.exit_code, 2);
  EXPECT_NE(form.err.find("train.stop_when: 'eval_accuracy > 0.8' is not \"METRIC >= VALUE\""),
            std::string::npos)
      << form.err;
  const auto no_evals = run_dense(dir.path(), {"train.stop_when=\"eval_accuracy >= 0.8\""});
  EXPECT_EQ(no_evals.exit_code, 2);
  EXPECT_NE(no_evals.err.find("eval_every_steps is 0 (none); set eval_every_steps = N"),
            std::string::npos)
      << no_evals.err;
  EXPECT_FALSE(fs::exists(dir / "overfit/dense/metrics.jsonl"));
  const auto metric = run_dense(
      dir.path(), {"train.eval_every_steps=3", "train.stop_when=\"eval_acuracy >= 0.8\""});
  EXPECT_EQ(metric.exit_code, 2);
  EXPECT_NE(metric.err.find("the task reports no metric 'eval_acuracy' (it reports: "
                            "eval_accuracy, eval_loss, eval_f1, eval_combined_score)"),
            std::string::npos)
      << metric.err;
}

}  // namespace
}  // namespace bertlab
