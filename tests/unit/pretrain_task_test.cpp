// The pretrain task: Google's losses and metrics on hand-made logits, the tied decoder, and the
// real executable: gradcheck of strategies, gradient accumulation and masked-LM normalization,
// and an end-to-end run; the masked LM alone (next_sentence = false) from create-data to the
// saved weights.

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/checkpoint.h>
#include <bertlab/io/safetensors.h>
#include <bertlab/model/bert.h>
#include <bertlab/model/init_checkpoint.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
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
using testing::write_file;

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

// ---------------------------------------------------------------------------------------------
// The masked LM alone (next_sentence = false)

TEST(PretrainModel, MaskedLmOnlyHasNoNextSentenceHead) {
  at::manual_seed(1234);
  PretrainOptions options;
  options.next_sentence = false;
  const PretrainTask task(options);
  const auto model = task.create_model(tiny_config(), /*sparse_embeddings=*/false);
  const auto params = model->named_parameters();
  for (const auto& p : params) {
    EXPECT_EQ(p.key().find("seq_relationship"), std::string::npos) << p.key();
  }
  EXPECT_TRUE(params.contains("cls.predictions.bias"));
  // BertModel always has its pooler; the masked LM leaves it without a gradient.
  EXPECT_TRUE(params.contains("bert.pooler.dense.weight"));
  EXPECT_EQ(task.hf_model_head().architecture, "BertForMaskedLM");
  EXPECT_EQ(PretrainTask(PretrainOptions{}).hf_model_head().architecture, "BertForPreTraining");

  const at::Tensor ids = at::tensor({2, 7, 8, 9, 3, 0}, at::kLong).reshape({1, 6});
  const Batch batch = {{"input_ids", ids},
                       {"segment_ids", at::zeros_like(ids)},
                       {"input_mask", ids.ne(0).to(at::kLong)},
                       {"masked_lm_positions", at::tensor({1, 3}, at::kLong).reshape({1, 2})},
                       {"masked_lm_ids", at::tensor({5, 6}, at::kLong).reshape({1, 2})},
                       {"masked_lm_weights", at::ones({1, 2})},
                       {"next_sentence_labels", at::tensor({0}, at::kLong)}};
  const LossOutput out = task.compute_loss(*model, batch);
  EXPECT_FALSE(out.loss.defined());  // the host takes the token-weighted part alone
  ASSERT_TRUE(out.weighted_loss_sum.defined());
  out.weighted_loss_sum.backward();
  EXPECT_FALSE(params["bert.pooler.dense.weight"].grad().defined());
  EXPECT_TRUE(params["cls.predictions.transform.dense.weight"].grad().defined());

  PretrainMetrics metrics;  // masked-LM metrics alone, no next-sentence logits needed
  const PretrainLogits logits = dynamic_cast<PretrainModelImpl&>(*model).forward(
      ids, at::zeros_like(ids), ids.ne(0), batch.at("masked_lm_positions"));
  EXPECT_FALSE(logits.next_sentence.defined());
  const PretrainLosses losses = pretrain_losses(logits, batch.at("masked_lm_ids"), at::ones({1, 2}),
                                                batch.at("next_sentence_labels"));
  EXPECT_FALSE(losses.next_sentence_mean.defined());
  metrics.add(logits, losses, batch.at("masked_lm_ids"), at::ones({1, 2}),
              batch.at("next_sentence_labels"));
  EXPECT_NEAR(metrics.masked_lm_loss(), losses.masked_lm_sum.item<double>() / 2, 1e-5);
}

TEST(PretrainModel, AnNspCheckpointInitializesTheMaskedLmOnlyModel) {
  at::manual_seed(1);
  PretrainModel full(tiny_config(), false);
  Checkpoint checkpoint;
  checkpoint.location.file = "full.safetensors";
  for (const auto& p : full->named_parameters())
    checkpoint.tensors.emplace_back(p.key(), p.value());
  PretrainModel mlm(tiny_config(), false, /*next_sentence=*/false);
  const InitReport report = init_from_checkpoint(*mlm, checkpoint, tiny_config(), {});
  EXPECT_TRUE(report.missing.empty());
  EXPECT_EQ(report.loaded.size(), mlm->named_parameters().size());
  std::vector<std::string> unused;
  for (const auto& u : report.unused) unused.push_back(u.name + ": " + u.reason);
  std::sort(unused.begin(), unused.end());
  EXPECT_EQ(unused, (std::vector<std::string>{
                        "cls.seq_relationship.bias: not a parameter of this model",
                        "cls.seq_relationship.weight: not a parameter of this model"}));
  EXPECT_TRUE(at::equal(mlm->named_parameters()["cls.predictions.transform.dense.weight"],
                        full->named_parameters()["cls.predictions.transform.dense.weight"]));
}

TEST(PretrainTask, MaskedLmOnlyGradcheckStrategiesAndAccumulation) {
  // The sentence-pair instances, read with their labels ignored; the loss is the token-weighted
  // part alone, and the pooler gets no gradient on any replica.
  TempDir out;
  const auto result =
      run_bertlab({"gradcheck", data_path("experiments/pretrain.toml").string(), "--steps", "2",
                   "--set", "task.next_sentence=false", "--output-dir", out.path().string()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("| mirrored-2-accumulate-2 |"), std::string::npos) << result.out;
}

/// Masked-LM-only instances of TREC's questions (plain text, one document) made by the real
/// executable: max_seq_length 64, 10 predictions, 2 passes.
fs::path masked_lm_instances(const TempDir& dir) {
  std::istringstream in(
      read_file(fs::path(BERTLAB_SOURCE_DIR) / "experiments/data/TREC/train_5500.label"));
  std::string text;
  for (std::string line; std::getline(in, line);) {
    for (const char c : line.substr(line.find(' ') + 1)) {
      if (static_cast<unsigned char>(c) < 0x80) text += c;  // line 66's raw 0xF0 byte off
    }
    text += '\n';
  }
  write_file(dir / "trec.txt", text);
  const auto made =
      run_bertlab({"pretrain", "create-data", "--input_file=" + (dir / "trec.txt").string(),
                   "--vocab_file=" + data_path("vocab/bert-base-uncased/vocab.txt").string(),
                   "--output_file=" + (dir / "mlm.jsonl").string(), "--next_sentence=false",
                   "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2"});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  return dir / "mlm.jsonl";
}

/// An experiment of 40 steps on `instances` with the tiny BERT (hidden 32, 2 layers, dropout
/// 0.1), the task's next_sentence = false, exported for Hugging Face.
fs::path masked_lm_experiment(const TempDir& dir, const fs::path& instances) {
  const std::string toml = R"([experiment]
name = "mlm"
seed = 7
threads = 1
export_hf = true

[model]
bert_config_file = ")" + data_path("experiments/bert_config_tiny.json").string() +
                           R"("
vocab_file = ")" + data_path("vocab/bert-base-uncased/vocab.txt").string() +
                           R"("

[task]
plugin = "pretrain"
input_file = ")" + instances.string() +
                           R"("
max_seq_length = 64
max_predictions_per_seq = 10
max_eval_steps = 4
next_sentence = false

[strategy]
plugin = "single"

[optimizer]
plugin = "adam_weight_decay"
learning_rate = 1e-3

[train]
train_batch_size = 8
eval_batch_size = 16
num_train_steps = 40
log_every_steps = 1

[[variant]]
name = "mlm-only"
)";
  write_file(dir / "mlm.toml", toml);
  return dir / "mlm.toml";
}

double mean_loss(const std::vector<nlohmann::json>& lines, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += lines[i]["loss"].get<double>();
  return sum / static_cast<double>(end - begin);
}

TEST(PretrainTask, MaskedLmOnlyFromCreateDataToWeightsWithoutNsp) {
  TempDir dir;
  const fs::path experiment = masked_lm_experiment(dir, masked_lm_instances(dir));
  const auto result =
      run_bertlab({"run", experiment.string(), "--output-dir", (dir / "runs").string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const fs::path variant = dir / "runs" / "mlm" / "mlm-only";
  const auto eval = nlohmann::json::parse(read_file(variant / "eval_results.json"));
  for (const char* key : {"masked_lm_accuracy", "masked_lm_loss", "loss"}) {
    EXPECT_TRUE(eval.contains(key)) << key;
  }
  EXPECT_FALSE(eval.contains("next_sentence_accuracy"));
  EXPECT_FALSE(eval.contains("next_sentence_loss"));
  EXPECT_EQ(eval["loss"], eval["masked_lm_loss"]);
  // It learns: the mean loss of the last 5 steps well under that of the first 5 (≈ ln 30522).
  const auto lines = testing::read_jsonl(variant / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 40U);
  EXPECT_LT(mean_loss(lines, 35, 40), mean_loss(lines, 0, 5) - 1.0)
      << mean_loss(lines, 0, 5) << " → " << mean_loss(lines, 35, 40);
  for (const auto* file : {"model.safetensors", "hf/model.safetensors"}) {
    bool masked_lm = false, pooler = false;
    for (const auto& [name, tensor] : read_safetensors(variant / file)) {
      EXPECT_EQ(name.find("cls.seq_relationship"), std::string::npos) << file << " " << name;
      masked_lm |= name == "cls.predictions.bias";
      pooler |= name.rfind("bert.pooler.", 0) == 0;
    }
    EXPECT_TRUE(masked_lm) << file;
    // Hugging Face's BertForMaskedLM has no pooler: the export leaves bertlab's out.
    EXPECT_EQ(pooler, std::string(file) == "model.safetensors") << file;
  }
  const auto config = nlohmann::json::parse(read_file(variant / "hf" / "config.json"));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"BertForMaskedLM"}));

  // The next-sentence head on these single segments is refused, naming the key.
  const auto pairs = run_bertlab({"run", experiment.string(), "--set", "task.next_sentence=true",
                                  "--output-dir", (dir / "runs2").string()});
  EXPECT_EQ(pairs.exit_code, 2) << pairs.err;
  EXPECT_NE(pairs.err.find("task.next_sentence = true, but the first instance of"),
            std::string::npos)
      << pairs.err;
}

}  // namespace
}  // namespace bertlab::pretrain
