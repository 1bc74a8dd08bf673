// `bertlab squad train`: run_squad.py's flags become the equivalent experiment, which is written
// (--write_experiment) or run by the real executable.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace bertlab::squad {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;

// Google's README command for SQuAD 2.0, scaled down to the tiny test model.
std::vector<std::string> google_flags(const TempDir& dir) {
  return {"squad",
          "train",
          "--vocab_file=" + data_path("vocab/bert-base-uncased/vocab.txt").string(),
          "--bert_config_file=" + data_path("experiments/bert_config_tiny.json").string(),
          "--do_train=True",
          "--train_file=" + data_path("squad/normans-3-train-v2.0.json").string(),
          "--do_predict=True",
          "--predict_file=" + data_path("squad/eval-sample.json").string(),
          "--train_batch_size=8",
          "--learning_rate=3e-5",
          "--num_train_epochs=0.2",
          "--max_seq_length=64",
          "--doc_stride=32",
          "--max_query_length",
          "16",
          "--output_dir=" + (dir / "out").string(),
          "--version_2_with_negative=True",
          "--null_score_diff_threshold=-1.0",
          "--num_gpus=2"};
}

TEST(SquadTrain, WritesTheEquivalentExperiment) {
  TempDir dir;
  auto args = google_flags(dir);
  args.push_back("--write_experiment=" + (dir / "exp.toml").string());
  const auto result = run_bertlab(args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string toml = read_file(dir / "exp.toml");
  for (const std::string line :
       {"plugin = \"squad\"", "version_2_with_negative = true", "max_seq_length = 64",
        "doc_stride = 32", "max_query_length = 16", "null_score_diff_threshold = -1.0",
        "plugin = \"mirrored\"", "replicas = 2", "learning_rate = 3e-05", "train_batch_size = 8",
        "num_train_epochs = 0.2", "do_eval = true", "name = \"mirrored-2\""}) {
    EXPECT_NE(toml.find(line + "\n"), std::string::npos) << line << "\n" << toml;
  }
  // The host accepts it as it stands.
  const auto check = run_bertlab({"validate", (dir / "exp.toml").string()});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_FALSE(fs::exists(dir / "out"));  // written, not run
}

TEST(SquadTrain, RunsTheExperimentWithMirroredReplicas) {
  TempDir dir;
  const auto result = run_bertlab(google_flags(dir));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "run_squad.toml"));
  const fs::path variant = dir / "out" / "run_squad" / "mirrored-2";
  for (const char* name :
       {"predictions.json", "nbest_predictions.json", "null_odds.json", "eval_results.json"}) {
    EXPECT_TRUE(fs::exists(variant / name)) << name;
  }
  const auto eval = nlohmann::json::parse(read_file(variant / "eval_results.json"));
  EXPECT_TRUE(eval.dump().find("HasAns_exact") != std::string::npos) << eval.dump();
}

TEST(SquadTrain, UnknownFlagsAndMissingOnesAreNamed) {
  TempDir dir;
  auto args = google_flags(dir);
  args.push_back("--doc_strid=64");
  const auto typo = run_bertlab(args);
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("unknown flag --doc_strid=64 (did you mean --doc_stride?)"),
            std::string::npos)
      << typo.err;

  const auto neither =
      run_bertlab({"squad", "train", "--vocab_file=v", "--bert_config_file=c", "--output_dir=o"});
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.err.find("--do_train or --do_predict"), std::string::npos) << neither.err;

  const auto no_train_file = run_bertlab(
      {"squad", "train", "--vocab_file=v", "--bert_config_file=c", "--output_dir=o", "--do_train"});
  EXPECT_EQ(no_train_file.exit_code, 2);
  EXPECT_NE(no_train_file.err.find("--train_file is required with --do_train"), std::string::npos)
      << no_train_file.err;
}

}  // namespace
}  // namespace bertlab::squad
