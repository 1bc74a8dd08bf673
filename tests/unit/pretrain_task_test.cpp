// The pretrain task: Google's losses and metrics on hand-made logits, the tied decoder, and the
// real executable: gradcheck of strategies, gradient accumulation and masked-LM normalization,
// and an end-to-end run.

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/model/bert.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "pretrain_model.h"
#include "pretrain_task.h"
#include "test_util.h"

namespace bertlab::pretrain {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;

// One example, two prediction slots over a 3-word vocabulary (the second slot is padding,
// weight 0), and next-sentence logits.
struct HandCase {
  PretrainLogits logits;
  at::Tensor ids = at::tensor({2, 0}, at::kLong).reshape({1, 2});
  at::Tensor weights = at::tensor({1.0F, 0.0F}).reshape({1, 2});
  at::Tensor nsp_labels = at::tensor({1}, at::kLong);
  HandCase() {
    logits.masked_lm =
        at::tensor({0.0F, 0.0F, std::log(2.0F), 5.0F, 0.0F, 0.0F}).reshape({1, 2, 3});
    logits.next_sentence = at::tensor({0.0F, std::log(3.0F)}).reshape({1, 2});
  }
};

TEST(PretrainLosses, WeightedMaskedLmAndNextSentenceByHand) {
  const HandCase c;
  const PretrainLosses l = pretrain_losses(c.logits, c.ids, c.weights, c.nsp_labels);
  // Slot 0: p(2) = 2 / (1 + 1 + 2) = 1/2, loss ln 2. Slot 1 has weight 0: it adds nothing.
  EXPECT_NEAR(l.masked_lm_sum.item<double>(), std::log(2.0), 1e-6);
  EXPECT_NEAR(l.masked_lm_weight.item<double>(), 1.0, 1e-12);
  // Slot 1 alone: p(0) = e^5 / (e^5 + 2).
  EXPECT_NEAR(l.masked_lm_example_loss[1].item<double>(), std::log(std::exp(5.0) + 2.0) - 5.0,
              1e-6);
  // Next sentence: p(1) = 3 / 4.
  EXPECT_NEAR(l.next_sentence_mean.item<double>(), -std::log(0.75), 1e-6);
}

TEST(PretrainMetrics, AccuracyAndLossAsGooglesMetricFn) {
  const HandCase c;
  PretrainMetrics m;
  m.add(c.logits, pretrain_losses(c.logits, c.ids, c.weights, c.nsp_labels), c.ids, c.weights,
        c.nsp_labels);
  // Slot 0's argmax is 2 = its label; slot 1 (argmax 0 = label, but weight 0) does not count.
  EXPECT_DOUBLE_EQ(m.masked_lm_accuracy(), 1.0);
  EXPECT_NEAR(m.masked_lm_loss(), std::log(2.0), 1e-6);
  EXPECT_DOUBLE_EQ(m.next_sentence_accuracy(), 1.0);
  // A second batch with a wrong masked-LM argmax and a wrong next-sentence label halves both.
  HandCase wrong;
  wrong.ids = at::tensor({0, 0}, at::kLong).reshape({1, 2});
  wrong.nsp_labels = at::tensor({0}, at::kLong);
  m.add(wrong.logits, pretrain_losses(wrong.logits, wrong.ids, wrong.weights, wrong.nsp_labels),
        wrong.ids, wrong.weights, wrong.nsp_labels);
  EXPECT_DOUBLE_EQ(m.masked_lm_accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(m.next_sentence_accuracy(), 0.5);
  // Mean of ln 2 and ln 4 (p(0) = 1/4 in slot 0 of the second batch).
  EXPECT_NEAR(m.masked_lm_loss(), (std::log(2.0) + std::log(4.0)) / 2, 1e-6);
}

BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.intermediate_size = 32;
  c.max_position_embeddings = 16;
  c.hidden_dropout_prob = 0.0;
  c.attention_probs_dropout_prob = 0.0;
  return c;
}

TEST(PretrainModel, TheDecoderIsTheWordEmbeddingTable) {
  at::manual_seed(1234);
  PretrainModel model(tiny_config(), /*sparse_embeddings=*/false);
  model->eval();  // no dropout: the same gradients on every run
  bool has_decoder = false;
  for (const auto& p : model->named_parameters()) {
    has_decoder |= p.key().find("decoder") != std::string::npos;
  }
  EXPECT_FALSE(has_decoder);  // no second [vocab, hidden] tensor
  const auto params = model->named_parameters();
  EXPECT_TRUE(params.contains("cls.predictions.bias"));
  EXPECT_TRUE(params.contains("cls.predictions.transform.dense.weight"));
  EXPECT_TRUE(params.contains("cls.predictions.transform.LayerNorm.weight"));
  EXPECT_TRUE(params.contains("cls.seq_relationship.weight"));
  // Gradient from both uses: the lookup touches rows 1-4, the decoder every row. Row 40 is
  // neither an input nor a label, so only the decoder can give it a gradient.
  const at::Tensor ids = at::tensor({1, 2, 3, 4}, at::kLong).reshape({1, 4});
  const PretrainLogits logits = model->forward(ids, at::zeros_like(ids), at::ones_like(ids),
                                               at::tensor({1, 2}, at::kLong).reshape({1, 2}));
  const PretrainLosses l = pretrain_losses(logits, at::tensor({5, 6}, at::kLong).reshape({1, 2}),
                                           at::ones({1, 2}), at::tensor({0}, at::kLong));
  (l.masked_lm_sum + l.next_sentence_mean).backward();
  const at::Tensor grad = model->bert->embeddings()->word_embeddings->weight.grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_GT(grad[40].abs().sum().item<double>(), 0.0);
  // Rows 1-4 get the decoder's gradient plus the lookup's, so they differ from the rows that
  // get the decoder's alone by more than those differ among themselves.
  const double input_rows = grad.slice(0, 1, 5).abs().sum().item<double>() / 4;
  const double other_rows = grad.slice(0, 40, 44).abs().sum().item<double>() / 4;
  EXPECT_GT(input_rows, 1.5 * other_rows) << input_rows << " vs " << other_rows;
}

TEST(PretrainTask, GradcheckStrategiesAccumulationAndNormalization) {
  TempDir out;
  const auto result = run_bertlab({"gradcheck", data_path("experiments/pretrain.toml").string(),
                                   "--steps", "2", "--output-dir", out.path().string()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto report = nlohmann::json::parse(read_file(out / "pretrain" / "gradcheck.json"));
  EXPECT_NE(result.out.find("per-replica-2"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("single-accumulate-2"), std::string::npos) << result.out;
  EXPECT_FALSE(report.empty());
}

TEST(PretrainTask, RunWritesGooglesMetrics) {
  TempDir out;
  const auto result =
      run_bertlab({"run", data_path("experiments/pretrain.toml").string(), "--variant", "single",
                   "--variant", "mirrored-2-accumulate-2", "--output-dir", out.path().string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const std::string variant : {"single", "mirrored-2-accumulate-2"}) {
    const auto eval =
        nlohmann::json::parse(read_file(out / "pretrain" / variant / "eval_results.json"));
    for (const char* key : {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                            "next_sentence_loss", "loss"}) {
      EXPECT_TRUE(eval.contains(key)) << variant << " " << key;
    }
    EXPECT_GT(eval["masked_lm_loss"].get<double>(), 0.0);
    EXPECT_EQ(eval["global_step"], 3);
  }
  EXPECT_NE(result.out.find("mirrored-2-accumulate-2"), std::string::npos);
}

TEST(PretrainTask, TrainsWithLamb) {
  TempDir out;
  const auto result = run_bertlab({"run", data_path("experiments/pretrain.toml").string(),
                                   "--variant", "mirrored-2", "--set", "optimizer.plugin=\"lamb\"",
                                   "--output-dir", out.path().string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("lamb: "), std::string::npos) << result.err;
  const auto eval =
      nlohmann::json::parse(read_file(out / "pretrain" / "mirrored-2" / "eval_results.json"));
  EXPECT_TRUE(std::isfinite(eval["loss"].get<double>()));
}

TEST(PretrainTask, InstancesOfAnotherLengthAreNamed) {
  try {
    read_instances(data_path("pretrain/sample_text-seed12345-len128-mp20-p0.15-dupe5.jsonl"),
                   InstanceShape{64, 20});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":1: input_ids has 128 values, expected 64"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace bertlab::pretrain
