// The Hugging Face export through the real executable: a classifier, a SQuAD and a pretraining
// run written as transformers folders ([experiment] export_hf and `bertlab export --hf`), read
// back by bertlab's own readers with every tensor equal; the exported classifier fine-tuned
// from gives the run's logits again; config.json and the tokenizer files say what transformers
// needs; and the errors a user meets.

#include <ATen/ATen.h>
#include <bertlab/io/checkpoint.h>
#include <bertlab/io/safetensors.h>
#include <bertlab/model/bert_config.h>
#include <bertlab/model/weight_names.h>
#include <bertlab/text/tokenizer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;

const char* const kFiles[] = {"config.json", "model.safetensors", "vocab.txt",
                              "tokenizer_config.json", "special_tokens_map.json"};

fs::path vocab() { return data_path("vocab/bert-base-uncased/vocab.txt"); }

/// Runs `experiment` (one variant) into `out` with export_hf on; returns the variant's folder.
fs::path run_exported(const std::string& experiment, const std::string& name,
                      const std::string& variant, const fs::path& out,
                      const std::vector<std::string>& sets = {}) {
  std::vector<std::string> args = {"run",          data_path("experiments/" + experiment).string(),
                                   "--variant",    variant,
                                   "--output-dir", out.string(),
                                   "--set",        "experiment.export_hf=true"};
  for (const auto& set : sets) {
    args.push_back("--set");
    args.push_back(set);
  }
  const auto r = run_bertlab(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out / name / variant;
}

std::map<std::string, at::Tensor> by_name(const NamedTensors& tensors) {
  return {tensors.begin(), tensors.end()};
}

/// Every tensor of the run's model.safetensors, read back from the exported folder by bertlab's
/// checkpoint reader, equal; `dropped` names the run's tensors the class does not have.
void expect_round_trip(const fs::path& variant_dir, const fs::path& hf,
                       const std::set<std::string>& dropped = {}) {
  const auto run = by_name(read_safetensors(variant_dir / "model.safetensors"));
  std::vector<SkippedTensor> skipped;
  const auto back = by_name(to_bertlab_names(read_checkpoint(hf), &skipped));
  EXPECT_TRUE(skipped.empty()) << skipped.front().name << ": " << skipped.front().reason;
  EXPECT_EQ(back.size() + dropped.size(), run.size());
  for (const auto& [name, tensor] : run) {
    if (dropped.count(name) != 0) {
      EXPECT_EQ(back.count(name), 0u) << name;
      continue;
    }
    ASSERT_EQ(back.count(name), 1u) << name << " is missing from the export";
    EXPECT_TRUE(at::equal(back.at(name), tensor)) << name;
  }
  // The config: bertlab's reader gives the run's BERT back.
  std::map<std::string, std::string> metadata;
  read_safetensors(variant_dir / "model.safetensors", &metadata);
  EXPECT_EQ(BertConfig::from_json_file(hf / "config.json").to_json(), metadata.at("bert_config"));
}

nlohmann::json json_of(const fs::path& path) { return nlohmann::json::parse(read_file(path)); }

TEST(HfExport, TheClassifierRunIsATransformersFolderThatReadsBackEqual) {
  TempDir dir;
  const fs::path variant = run_exported("hf_export.toml", "hf-export", "classifier", dir.path());
  const fs::path hf = variant / "hf";
  for (const char* file : kFiles) EXPECT_TRUE(fs::is_regular_file(hf / file)) << file;
  expect_round_trip(variant, hf);

  const nlohmann::json config = json_of(hf / "config.json");
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"BertForSequenceClassification"}));
  EXPECT_EQ(config["model_type"], "bert");
  // MRPC's labels are "0" and "1", as run_classifier.py's MrpcProcessor names them.
  EXPECT_EQ(config["id2label"], (nlohmann::json{{"0", "0"}, {"1", "1"}}));
  EXPECT_EQ(config["label2id"], (nlohmann::json{{"0", 0}, {"1", 1}}));
  EXPECT_EQ(config["problem_type"], "single_label_classification");
  EXPECT_EQ(config["hidden_act"], "gelu");
  EXPECT_EQ(config["layer_norm_eps"], 1e-12);
  EXPECT_EQ(config["pad_token_id"], 0);
  const nlohmann::json tiny = json_of(data_path("experiments/bert_config_tiny.json"));
  for (const auto& [key, value] : tiny.items()) EXPECT_EQ(config[key], value) << key;

  // The tokenizer: the run's vocabulary byte for byte, lower-cased as it trained.
  EXPECT_EQ(read_file(hf / "vocab.txt"), read_file(vocab()));
  const nlohmann::json tokenizer = json_of(hf / "tokenizer_config.json");
  EXPECT_EQ(tokenizer["do_lower_case"], true);
  EXPECT_EQ(tokenizer["model_max_length"], tiny["max_position_embeddings"]);
  EXPECT_EQ(tokenizer["tokenizer_class"], "BertTokenizer");
  const nlohmann::json special = json_of(hf / "special_tokens_map.json");
  EXPECT_EQ(special, (nlohmann::json{{"cls_token", "[CLS]"},
                                     {"mask_token", "[MASK]"},
                                     {"pad_token", "[PAD]"},
                                     {"sep_token", "[SEP]"},
                                     {"unk_token", "[UNK]"}}));
  for (const auto& [key, token] : special.items()) EXPECT_EQ(tokenizer[key], token) << key;

  // The safetensors file is what transformers' loader wants: metadata format "pt".
  std::map<std::string, std::string> metadata;
  read_safetensors(hf / "model.safetensors", &metadata);
  EXPECT_EQ(metadata.at("format"), "pt");

  // The command writes the same folder.
  const fs::path again = dir / "again";
  const auto r = run_bertlab({"export", "--hf", variant.string(), again.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("BertForSequenceClassification, 41 tensors, 2 labels"), std::string::npos)
      << r.out;
  for (const char* file : kFiles) {
    EXPECT_EQ(read_file(again / file), read_file(hf / file)) << file;
  }
}

TEST(HfExport, TheExportedClassifierEvaluatesToTheRunsLogits) {
  TempDir dir;
  const fs::path variant = run_exported("hf_export.toml", "hf-export", "classifier", dir / "a");
  const std::string logits = read_file(variant / "eval_logits.tsv");
  // A line per dev example (32), two logits each.
  std::istringstream lines(logits);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    EXPECT_EQ(std::count(line.begin(), line.end(), '\t'), 1) << line;
  }
  EXPECT_EQ(n, 32);
  // Evaluating the exported folder as init_checkpoint, no training: the same logits, bit for bit.
  const fs::path again = run_exported("hf_export.toml", "hf-export", "classifier", dir / "b",
                                      {"model.init_checkpoint=" + (variant / "hf").string(),
                                       "train.do_train=false", "experiment.export_hf=false"});
  EXPECT_EQ(read_file(again / "eval_logits.tsv"), logits);
}

TEST(HfExport, SquadIsBertForQuestionAnsweringWithoutThePooler) {
  TempDir dir;
  const fs::path variant = run_exported("squad.toml", "squad", "single", dir.path(),
                                        {"train.num_train_steps=1", "train.do_eval=false"});
  const fs::path hf = variant / "hf";
  expect_round_trip(variant, hf, {"bert.pooler.dense.weight", "bert.pooler.dense.bias"});
  const nlohmann::json config = json_of(hf / "config.json");
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"BertForQuestionAnswering"}));
  EXPECT_FALSE(config.contains("id2label"));
  const auto tensors = by_name(read_safetensors(hf / "model.safetensors"));
  EXPECT_EQ(tensors.at("qa_outputs.weight").sizes(), (at::IntArrayRef{2, 32}));
}

TEST(HfExport, PretrainingIsBertForPreTrainingWithTheDecoderTied) {
  TempDir dir;
  const fs::path variant = run_exported("pretrain.toml", "pretrain", "single", dir.path(),
                                        {"train.num_train_steps=1", "train.do_eval=false"});
  const fs::path hf = variant / "hf";
  expect_round_trip(variant, hf);
  EXPECT_EQ(json_of(hf / "config.json")["architectures"],
            nlohmann::json::array({"BertForPreTraining"}));
  // The decoder is the word embedding (transformers ties it on load, tie_word_embeddings being
  // its default): stored once, as save_pretrained stores it; the heads' other tensors all there.
  const auto tensors = by_name(read_safetensors(hf / "model.safetensors"));
  EXPECT_EQ(tensors.count("cls.predictions.decoder.weight"), 0u);
  for (const char* name : {"cls.predictions.bias", "cls.predictions.transform.dense.weight",
                           "cls.predictions.transform.LayerNorm.weight",
                           "cls.seq_relationship.weight", "bert.pooler.dense.weight"}) {
    EXPECT_EQ(tensors.count(name), 1u) << name;
  }
}

TEST(HfExport, ARunWithoutTheHeadsMetadataIsToldByItsNames) {
  TempDir dir;
  const fs::path variant = run_exported("hf_export.toml", "hf-export", "classifier", dir.path(),
                                        {"experiment.export_hf=false"});
  // As a run of an earlier bertlab wrote it: weights and bert_config only.
  std::map<std::string, std::string> metadata;
  const NamedTensors tensors = read_safetensors(variant / "model.safetensors", &metadata);
  const fs::path old = dir / "old";
  write_safetensors(old / "model.safetensors", tensors,
                    {{"format", "pt"}, {"bert_config", metadata.at("bert_config")}});
  auto r = run_bertlab({"export", "--hf", old.string(), (dir / "hf").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did not record its vocabulary; pass --vocab"), std::string::npos) << r.err;
  r = run_bertlab(
      {"export", "--hf", old.string(), (dir / "hf").string(), "--vocab", vocab().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json config = json_of(dir / "hf" / "config.json");
  EXPECT_EQ(config["id2label"], (nlohmann::json{{"0", "LABEL_0"}, {"1", "LABEL_1"}}));
  EXPECT_EQ(config["problem_type"], "single_label_classification");
  expect_round_trip(old, dir / "hf");
}

TEST(HfExport, MistakesAreClearErrors) {
  TempDir dir;
  auto r = run_bertlab({"export", "--hf", dir.path().string(), (dir / "out").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no model.safetensors here; name a variant's folder"), std::string::npos)
      << r.err;
  r = run_bertlab({"export", dir.path().string(), (dir / "out").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--hf is the one there is"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  // A vocabulary larger than the model's word embedding.
  const fs::path variant = run_exported("hf_export.toml", "hf-export", "classifier", dir / "run",
                                        {"experiment.export_hf=false"});
  testing::write_file(dir / "big.txt", read_file(vocab()) + "[extra]\n");
  r = run_bertlab({"export", "--hf", variant.string(), (dir / "out").string(), "--vocab",
                   (dir / "big.txt").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("30523 tokens, more than the model's vocab_size 30522"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "out" / "config.json"));
}

}  // namespace
}  // namespace bertlab
