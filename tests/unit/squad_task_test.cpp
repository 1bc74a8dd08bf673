// The squad task end to end: the real executable runs an experiment file, which trains, predicts
// and scores with the official metrics; and the task's pieces (batches, loss) directly.

#include <ATen/ATen.h>
#include <bertlab/model/bert.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "squad_model.h"
#include "squad_options.h"
#include "squad_task.h"
#include "test_util.h"

namespace bertlab::squad {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(read_file(path)); }

TEST(SquadTask, ExperimentWritesPredictionsAndOfficialMetrics) {
  TempDir out;
  const auto result = run_bertlab(
      {"run", data_path("experiments/squad.toml").string(), "--output-dir", out.path().string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;

  const std::set<std::string> ids = {"5ad3d560604f3c001a3ff2c6", "5ad3d560604f3c001a3ff2c7",
                                     "5ad3d560604f3c001a3ff2c8"};
  for (const std::string variant : {"single", "sparse-allgather-2"}) {
    SCOPED_TRACE(variant);
    const fs::path dir = out / "squad" / variant;
    const nlohmann::json predictions = read_json(dir / "predictions.json");
    const nlohmann::json nbest = read_json(dir / "nbest_predictions.json");
    const nlohmann::json null_odds = read_json(dir / "null_odds.json");
    std::set<std::string> predicted, in_nbest, in_null_odds;
    for (const auto& [id, text] : predictions.items()) {
      predicted.insert(id);
      EXPECT_TRUE(text.is_string());
    }
    for (const auto& [id, entries] : nbest.items()) {
      in_nbest.insert(id);
      ASSERT_TRUE(entries.is_array());
      EXPECT_GE(entries.size(), 1U);
      EXPECT_LE(entries.size(), 6U);  // n_best_size 5, plus the null answer in v2
      double probability = 0.0;
      for (const auto& entry : entries) probability += entry.at("probability").get<double>();
      EXPECT_NEAR(probability, 1.0, 1e-9);
    }
    for (const auto& [id, odds] : null_odds.items()) {
      in_null_odds.insert(id);
      EXPECT_TRUE(odds.is_number());
    }
    EXPECT_EQ(predicted, ids);
    EXPECT_EQ(in_nbest, ids);
    EXPECT_EQ(in_null_odds, ids);

    // eval_results.json holds what `bertlab squad evaluate` says of the same files.
    const nlohmann::json eval = read_json(dir / "eval_results.json");
    const auto official = run_bertlab({"squad", "evaluate", "--data_file",
                                       data_path("squad/eval-sample.json").string(), "--pred_file",
                                       (dir / "predictions.json").string(), "--na_prob_file",
                                       (dir / "null_odds.json").string()});
    ASSERT_EQ(official.exit_code, 0) << official.err;
    const nlohmann::json scores = nlohmann::json::parse(official.out);
    for (const std::string key : {"exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                                  "NoAns_exact", "NoAns_f1", "best_exact", "best_f1"}) {
      ASSERT_TRUE(scores.contains(key)) << key;
      ASSERT_TRUE(eval.contains(key)) << key << " in " << eval.dump();
      EXPECT_DOUBLE_EQ(eval.at(key).get<double>(), scores.at(key).get<double>()) << key;
    }
    EXPECT_EQ(scores.at("total").get<int>(), 3);
    EXPECT_EQ(scores.at("HasAns_total").get<int>(), 2);
    EXPECT_EQ(scores.at("NoAns_total").get<int>(), 1);
  }
  const std::string comparison = read_file(out / "squad" / "comparison.md");
  EXPECT_NE(comparison.find("HasAns_f1"), std::string::npos) << comparison;
  EXPECT_NE(comparison.find("sparse-allgather-2"), std::string::npos) << comparison;
}

TEST(SquadTask, LossIsTheMeanOfStartAndEndCrossEntropy) {
  // Batch of 2, sequence of 3: with all-zero start logits every position has probability 1/3,
  // so the start loss is log 3; the end logits put 0 and log 2 ... derived per row below.
  const at::Tensor start = at::zeros({2, 3});
  const at::Tensor end = at::tensor({0.0F, 0.0F, std::log(2.0F), 0.0F, 0.0F, 0.0F}).view({2, 3});
  const at::Tensor start_positions = at::tensor({0L, 2L});
  const at::Tensor end_positions = at::tensor({2L, 1L});
  // Row 0 end: softmax of (0, 0, log 2) = (1/4, 1/4, 1/2); gold 2 → −log(1/2) = log 2.
  // Row 1 end: uniform, −log(1/3). Mean end loss (log 2 + log 3) / 2; start loss log 3.
  const double expected = (std::log(3.0) + (std::log(2.0) + std::log(3.0)) / 2.0) / 2.0;
  const at::Tensor loss = span_loss(SpanLogits{start, end}, start_positions, end_positions);
  EXPECT_NEAR(loss.item<double>(), expected, 1e-6);
}

TEST(SquadTask, ModelNamesFollowHuggingFaceAndGoogleInit) {
  BertConfig config = BertConfig::from_json_file(data_path("experiments/bert_config_tiny.json"));
  at::manual_seed(1);
  SquadModel model(config, /*sparse_embeddings=*/false);
  const auto params = model->named_parameters();
  ASSERT_TRUE(params.contains("qa_outputs.weight"));
  ASSERT_TRUE(params.contains("qa_outputs.bias"));
  EXPECT_EQ(params["qa_outputs.weight"].sizes(), (at::IntArrayRef{2, config.hidden_size}));
  EXPECT_EQ(params["qa_outputs.bias"].abs().max().item<double>(), 0.0);
  // Truncated at two standard deviations of 0.02.
  EXPECT_LE(params["qa_outputs.weight"].abs().max().item<double>(), 0.04 + 1e-7);
  const at::Tensor ids = at::tensor({101L, 2054L, 102L, 0L}).view({1, 4});
  const SpanLogits logits = model->forward(ids, at::zeros_like(ids), at::ones_like(ids));
  EXPECT_EQ(logits.start.sizes(), (at::IntArrayRef{1, 4}));
  EXPECT_EQ(logits.end.sizes(), (at::IntArrayRef{1, 4}));
}

TEST(SquadTask, MissingFilesAndBadLengthsAreConfigErrors) {
  TempDir out;
  const auto none = run_bertlab(
      {"run", data_path("experiments/squad.toml").string(), "--output-dir", out.path().string(),
       "--set", "task.train_file=\"\"", "--set", "task.predict_file=\"\"", "--variant", "single"});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("train_file"), std::string::npos) << none.err;
  const auto lengths = run_bertlab({"run", data_path("experiments/squad.toml").string(),
                                    "--output-dir", out.path().string(), "--set",
                                    "task.max_query_length=126", "--variant", "single"});
  EXPECT_EQ(lengths.exit_code, 2) << lengths.err;
  EXPECT_NE(lengths.err.find("max_query_length"), std::string::npos) << lengths.err;
}

}  // namespace
}  // namespace bertlab::squad
