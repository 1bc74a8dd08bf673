// Checkpoints in the SDK: format detection by content, the Google <-> bertlab name mapping, and
// init_from_checkpoint's loading and report on the two published tiny checkpoints.

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/checkpoint.h>
#include <bertlab/io/tf_checkpoint.h>
#include <bertlab/model/bert.h>
#include <bertlab/model/init_checkpoint.h>
#include <bertlab/model/weight_names.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <map>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::TempDir;

fs::path tiny_tf() { return data_path("checkpoints/tiny-tf/bert_model.ckpt"); }
fs::path tiny_pytorch() { return data_path("checkpoints/tiny-pytorch/pytorch_model.bin"); }

/// A sequence classifier named as Hugging Face's BertForSequenceClassification.
struct Classifier : torch::nn::Module {
  Classifier(const BertConfig& config, int64_t labels) {
    bert = register_module("bert", BertModel(config, false));
    classifier = register_module("classifier", torch::nn::Linear(config.hidden_size, labels));
  }
  BertModel bert{nullptr};
  torch::nn::Linear classifier{nullptr};
};

std::map<std::string, at::Tensor> by_name(const NamedTensors& tensors) {
  return {tensors.begin(), tensors.end()};
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    std::string all;
    for (const auto& m : e.messages()) all += m + "\n";
    return all;
  }
  return "";
}

TEST(CheckpointNames, GoogleNamesMapAsHuggingFaceAndBack) {
  struct Case {
    const char* google;
    const char* bertlab;
    bool transpose;
  };
  const Case cases[] = {
      {"bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight", false},
      {"bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight", false},
      {"bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias", false},
      {"bert/encoder/layer_11/attention/self/query/kernel",
       "bert.encoder.layer.11.attention.self.query.weight", true},
      {"bert/encoder/layer_0/output/dense/bias", "bert.encoder.layer.0.output.dense.bias", false},
      {"bert/pooler/dense/kernel", "bert.pooler.dense.weight", true},
      {"cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight", true},
      {"cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight",
       false},
      {"cls/predictions/output_bias", "cls.predictions.bias", false},
      {"cls/seq_relationship/output_weights", "cls.seq_relationship.weight", false},
      {"output_weights", "classifier.weight", false},
      {"cls/squad/output_bias", "qa_outputs.bias", false},
  };
  for (const auto& c : cases) {
    const int64_t dims = c.transpose ? 2 : 1;
    auto forward = map_google_name(c.google, dims);
    ASSERT_TRUE(forward.has_value()) << c.google;
    EXPECT_EQ(forward->kind, MappedName::Kind::kWeight);
    EXPECT_EQ(forward->name, c.bertlab);
    EXPECT_EQ(forward->transpose, c.transpose) << c.google;
    auto back = google_name_of(c.bertlab, dims);
    ASSERT_TRUE(back.has_value()) << c.bertlab;
    EXPECT_EQ(back->name, c.google);
    EXPECT_EQ(back->transpose, c.transpose);
  }
  EXPECT_EQ(map_google_name("global_step", 0)->kind, MappedName::Kind::kGlobalStep);
  EXPECT_EQ(map_google_name("bert/pooler/dense/kernel/adam_m", 2)->kind,
            MappedName::Kind::kOptimizerSlot);
  EXPECT_FALSE(map_google_name("some/other/variable", 1).has_value());
  // Older PyTorch names and a bare BertModel.
  EXPECT_EQ(map_hf_name("bert.encoder.layer.0.output.LayerNorm.gamma").name,
            "bert.encoder.layer.0.output.LayerNorm.weight");
  EXPECT_EQ(map_hf_name("embeddings.LayerNorm.beta").name, "bert.embeddings.LayerNorm.bias");
  EXPECT_EQ(map_hf_name("bert.embeddings.position_ids").kind, MappedName::Kind::kBuffer);
}

TEST(CheckpointNames, EveryWeightOfTheTinyTfCheckpointRoundTrips) {
  const Checkpoint ckpt = read_checkpoint(tiny_tf());
  std::vector<SkippedTensor> skipped;
  const NamedTensors bertlab = to_bertlab_names(ckpt, &skipped);
  const NamedTensors google = to_google_names(bertlab, &skipped);
  // 2 layers x 16 + 5 embeddings + 2 pooler + 7 pretraining-head tensors.
  EXPECT_EQ(bertlab.size(), 46u);
  ASSERT_EQ(google.size(), bertlab.size());
  const auto original = by_name(ckpt.tensors);
  for (const auto& [name, t] : google) {
    ASSERT_TRUE(original.count(name)) << name;
    EXPECT_TRUE(at::equal(t, original.at(name))) << name;
  }
  int slots = 0, steps = 0;
  for (const auto& s : skipped) {
    slots += s.reason == std::string("optimizer slot");
    steps += s.reason == std::string("global_step");
  }
  EXPECT_EQ(slots, 2 * 46);
  EXPECT_EQ(steps, 1);
  // A kernel is transposed into the Linear layout: [out, in].
  const auto mapped = by_name(bertlab);
  EXPECT_TRUE(at::equal(mapped.at("bert.encoder.layer.0.intermediate.dense.weight"),
                        original.at("bert/encoder/layer_0/intermediate/dense/kernel").t()));
}

TEST(CheckpointFormat, IsRecognisedByContentNotByName) {
  TempDir dir;
  fs::copy_file(tiny_pytorch(), dir / "weights.dat");
  write_safetensors(dir / "model.bin", {{"x", at::ones({2})}});
  EXPECT_EQ(locate_checkpoint(dir / "weights.dat").format, CheckpointFormat::kPyTorch);
  EXPECT_EQ(locate_checkpoint(dir / "model.bin").format, CheckpointFormat::kSafetensors);
  EXPECT_EQ(locate_checkpoint(tiny_tf()).format, CheckpointFormat::kTensorFlow);
  EXPECT_EQ(locate_checkpoint(tiny_tf().string() + ".index").format, CheckpointFormat::kTensorFlow);
  // A folder with one checkpoint names it.
  EXPECT_EQ(locate_checkpoint(data_path("checkpoints/tiny-pytorch")).format,
            CheckpointFormat::kPyTorch);
  EXPECT_EQ(locate_checkpoint(data_path("checkpoints/tiny-tf")).file.filename(),
            "bert_model.ckpt.index");
  testing::write_file(dir / "notes.txt", "not a checkpoint\n");
  try {
    locate_checkpoint(dir / "notes.txt");
    FAIL() << "a text file was taken for a checkpoint";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("not a checkpoint bertlab reads"), std::string::npos);
  }
  EXPECT_THROW(locate_checkpoint(dir / "missing.ckpt"), DataError);
}

TEST(InitCheckpoint, TheTinyTfCheckpointLoadsAndRuns) {
  const BertConfig config =
      BertConfig::from_json_file(data_path("checkpoints/tiny-tf/bert_config.json"));
  Classifier model(config, 2);
  const Checkpoint ckpt = read_checkpoint(tiny_tf());
  const InitReport report = init_from_checkpoint(model, ckpt, config, {});
  EXPECT_EQ(report.loaded.size(), 39u);  // every BERT parameter
  EXPECT_EQ(report.missing, (std::vector<std::string>{"classifier.bias", "classifier.weight"}));
  int heads = 0;
  for (const auto& u : report.unused)
    heads += u.reason == std::string("not a parameter of this model");
  EXPECT_EQ(heads, 7);  // cls/predictions and cls/seq_relationship
  const auto original = by_name(ckpt.tensors);
  const auto params = model.named_parameters(true);
  EXPECT_TRUE(at::equal(params["bert.encoder.layer.1.attention.self.key.weight"],
                        original.at("bert/encoder/layer_1/attention/self/key/kernel").t()));
  EXPECT_TRUE(at::equal(params["bert.embeddings.word_embeddings.weight"],
                        original.at("bert/embeddings/word_embeddings")));
  // A forward pass of the loaded model.
  model.eval();
  const at::Tensor ids = at::tensor({2, 5, 6, 3, 0, 0}, at::kLong).reshape({1, 6});
  const at::Tensor mask = at::tensor({1, 1, 1, 1, 0, 0}, at::kLong).reshape({1, 6});
  BertOutput out = model.bert->forward(ids, at::Tensor(), mask);
  EXPECT_EQ(out.sequence_output.sizes(), (std::vector<int64_t>{1, 6, 4}));
  EXPECT_TRUE(out.pooled_output.isfinite().all().item<bool>());
  const nlohmann::json j = nlohmann::json::parse(report.to_json());
  EXPECT_EQ(j["format"], "tensorflow");
  EXPECT_EQ(j["loaded"].size(), 39u);
}

TEST(InitCheckpoint, TheTinyPytorchCheckpointReportsItsMissingPooler) {
  const BertConfig config =
      BertConfig::from_json_file(data_path("checkpoints/tiny-pytorch/config.json"));
  ASSERT_EQ(config.vocab_size, 402);
  Classifier model(config, 9);
  const InitReport report =
      init_from_checkpoint(model, read_checkpoint(tiny_pytorch()), config, {});
  EXPECT_EQ(report.missing,
            (std::vector<std::string>{"bert.pooler.dense.bias", "bert.pooler.dense.weight"}));
  EXPECT_TRUE(contains(report.loaded, "classifier.weight"));  // a 9-label head, as here
  ASSERT_EQ(report.notes.size(), 1u);
  EXPECT_NE(report.notes[0].find("no pooler"), std::string::npos);
  bool position_ids = false;
  for (const auto& u : report.unused) position_ids |= u.name == "bert.embeddings.position_ids";
  EXPECT_TRUE(position_ids);
  EXPECT_NE(report.summary().find("bert.pooler.dense.weight"), std::string::npos);
}

TEST(InitCheckpoint, AConfigThatDoesNotFitTheCheckpointNamesEachField) {
  BertConfig config = BertConfig::from_json_file(data_path("checkpoints/tiny-tf/bert_config.json"));
  config.vocab_size = 30;
  config.num_hidden_layers = 3;
  Classifier model(config, 2);
  const std::string message =
      config_error([&] { init_from_checkpoint(model, read_checkpoint(tiny_tf()), config, {}); });
  EXPECT_NE(message.find("vocab_size: bert_config says 30, the checkpoint's "
                         "bert.embeddings.word_embeddings.weight has 15 rows"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("num_hidden_layers: bert_config says 3, the checkpoint has 2 layers"),
            std::string::npos)
      << message;
}

TEST(InitCheckpoint, AHeadOfAnotherShapeIsAnErrorUnlessExcluded) {
  const BertConfig config =
      BertConfig::from_json_file(data_path("checkpoints/tiny-pytorch/config.json"));
  Classifier model(config, 2);  // the checkpoint's head has 9 labels
  const Checkpoint ckpt = read_checkpoint(tiny_pytorch());
  const std::string message = config_error([&] { init_from_checkpoint(model, ckpt, config, {}); });
  EXPECT_NE(message.find("classifier.weight has shape [9, 16] in the checkpoint but [2, 16] in "
                         "the model"),
            std::string::npos)
      << message;
  const at::Tensor before = model.classifier->weight.clone();
  const InitReport report = init_from_checkpoint(model, ckpt, config, {"classifier."});
  EXPECT_EQ(report.excluded, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_TRUE(at::equal(model.classifier->weight, before));
}

}  // namespace
}  // namespace bertlab
