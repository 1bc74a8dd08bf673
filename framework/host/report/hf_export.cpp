// `bertlab export --hf`: a variant's model.safetensors and tokenizer as a Hugging Face folder.
// Names and shapes follow transformers' modeling_bert.py: bertlab's parameters already carry
// them (bert.*, classifier.*, qa_outputs.*, cls.*); the export picks the class's set.

#include "report/hf_export.h"

#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/io/safetensors.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kArchitectureKey = "hf_architecture";
constexpr const char* kLabelsKey = "hf_labels";
constexpr const char* kProblemTypeKey = "hf_problem_type";
constexpr const char* kVocabKey = "vocab_file";
constexpr const char* kLowerCaseKey = "do_lower_case";

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool has_tensor(const NamedTensors& tensors, const std::string& prefix) {
  for (const auto& [name, tensor] : tensors) {
    if (starts_with(name, prefix)) return true;
  }
  return false;
}

const at::Tensor* find_tensor(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, tensor] : tensors) {
    if (n == name) return &tensor;
  }
  return nullptr;
}

/// The model class and head of a run written before the metadata had them (or by a task that
/// does not say): told by the head's parameter names.
HfModelHead head_from_names(const NamedTensors& tensors) {
  if (const at::Tensor* classifier = find_tensor(tensors, "classifier.weight")) {
    HfModelHead head{"BertForSequenceClassification", {}, ""};
    const int64_t n = classifier->size(0);
    head.problem_type = n == 1 ? "regression" : "single_label_classification";
    for (int64_t i = 0; n > 1 && i < n; ++i) head.labels.push_back(fmt::format("LABEL_{}", i));
    return head;
  }
  if (has_tensor(tensors, "qa_outputs.")) return {"BertForQuestionAnswering", {}, ""};
  if (has_tensor(tensors, "cls.seq_relationship.")) return {"BertForPreTraining", {}, ""};
  if (has_tensor(tensors, "cls.")) return {"BertForMaskedLM", {}, ""};
  return {"BertModel", {}, ""};
}

/// The class's parameters, under its names: a bare BertModel has no "bert." prefix;
/// BertForQuestionAnswering and BertForMaskedLM have no pooler; BertForPreTraining's decoder is the
/// word embedding (tied: stored once, as save_pretrained stores it).
NamedTensors tensors_for(const std::string& architecture, const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& [name, tensor] : tensors) {
    if (architecture == "BertModel") {
      if (starts_with(name, "bert.")) out.emplace_back(name.substr(5), tensor);
      continue;
    }
    if ((architecture == "BertForQuestionAnswering" || architecture == "BertForMaskedLM") &&
        starts_with(name, "bert.pooler.")) {
      continue;
    }
    if (name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias") {
      continue;
    }
    out.emplace_back(name, tensor);
  }
  return out;
}

/// transformers' name of an activation (ACT2FN): Google's tanh approximation is gelu_new.
std::string hf_activation(const std::string& act) { return act == "gelu_tanh" ? "gelu_new" : act; }

nlohmann::json hf_config(const nlohmann::json& bert, const HfModelHead& head, int64_t pad_id) {
  nlohmann::json config;  // keys sorted, as save_pretrained writes them
  config["architectures"] = nlohmann::json::array({head.architecture});
  config["model_type"] = "bert";
  for (const char* key :
       {"attention_probs_dropout_prob", "hidden_dropout_prob", "hidden_size", "initializer_range",
        "intermediate_size", "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
        "type_vocab_size", "vocab_size"}) {
    if (bert.contains(key)) config[key] = bert.at(key);
  }
  config["hidden_act"] = hf_activation(bert.value("hidden_act", std::string("gelu")));
  config["layer_norm_eps"] = 1e-12;  // Google's and bertlab's LayerNorm epsilon
  config["pad_token_id"] = pad_id;
  config["position_embedding_type"] = "absolute";
  config["classifier_dropout"] = nullptr;  // the classifier's dropout is hidden_dropout_prob
  config["torch_dtype"] = "float32";
  config["use_cache"] = true;
  if (head.architecture == "BertForSequenceClassification") {
    nlohmann::json id2label = nlohmann::json::object();
    nlohmann::json label2id = nlohmann::json::object();
    const std::vector<std::string> labels =
        head.labels.empty() ? std::vector<std::string>{"LABEL_0"} : head.labels;
    for (size_t i = 0; i < labels.size(); ++i) {
      id2label[std::to_string(i)] = labels[i];
      label2id[labels[i]] = i;
    }
    config["id2label"] = id2label;
    config["label2id"] = label2id;
    config["problem_type"] =
        head.problem_type.empty()
            ? (labels.size() == 1 ? "regression" : "single_label_classification")
            : head.problem_type;
  }
  return config;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  BERTLAB_CHECK_AS(DataError, in.good(), "{}: cannot read the vocabulary", path.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

std::map<std::string, std::string> hf_export_metadata(const HfModelHead& head,
                                                      const fs::path& vocab_file,
                                                      bool do_lower_case) {
  std::map<std::string, std::string> metadata = {
      {kVocabKey, fs::absolute(vocab_file).lexically_normal().string()},
      {kLowerCaseKey, do_lower_case ? "true" : "false"}};
  if (!head.architecture.empty()) {
    metadata[kArchitectureKey] = head.architecture;
    metadata[kLabelsKey] = nlohmann::json(head.labels).dump();
    metadata[kProblemTypeKey] = head.problem_type;
  }
  return metadata;
}

HfExportResult export_hf(const HfExportOptions& options) {
  const fs::path model_file = options.variant_dir / "model.safetensors";
  BERTLAB_CHECK_AS(DataError, fs::is_regular_file(model_file),
                   "{}: no model.safetensors here; name a variant's folder of a finished run "
                   "(OUTPUT_DIR/EXPERIMENT/VARIANT)",
                   options.variant_dir.string());
  std::map<std::string, std::string> metadata;
  const NamedTensors tensors = read_safetensors(model_file, &metadata);
  BERTLAB_CHECK_AS(DataError, metadata.count("bert_config") != 0,
                   "{}: its metadata has no bert_config; it was not written by a bertlab run",
                   model_file.string());
  nlohmann::json bert;
  try {
    bert = nlohmann::json::parse(metadata.at("bert_config"));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: the metadata's bert_config is not JSON: {}",
                                model_file.string(), e.what()));
  }

  HfModelHead head = head_from_names(tensors);
  if (metadata.count(kArchitectureKey) != 0) {
    head.architecture = metadata.at(kArchitectureKey);
    head.labels = nlohmann::json::parse(metadata.at(kLabelsKey)).get<std::vector<std::string>>();
    head.problem_type = metadata.at(kProblemTypeKey);
  }
  if (head.architecture == "BertForSequenceClassification") {
    const at::Tensor* classifier = find_tensor(tensors, "classifier.weight");
    const auto outputs = classifier != nullptr ? classifier->size(0) : 0;
    const auto expected = std::max<int64_t>(1, static_cast<int64_t>(head.labels.size()));
    BERTLAB_CHECK_AS(DataError, outputs == expected,
                     "{}: classifier.weight has {} outputs for {} labels", model_file.string(),
                     outputs, expected);
  }

  fs::path vocab_file;
  if (options.vocab_file) {
    vocab_file = *options.vocab_file;
  } else {
    BERTLAB_CHECK_AS(ConfigError, metadata.count(kVocabKey) != 0,
                     "{}: the run did not record its vocabulary; pass --vocab VOCAB.txt (the "
                     "[model] vocab_file it trained with)",
                     model_file.string());
    vocab_file = metadata.at(kVocabKey);
    BERTLAB_CHECK_AS(ConfigError, fs::is_regular_file(vocab_file),
                     "{}: the vocabulary the run trained with, {}, is gone; pass --vocab "
                     "VOCAB.txt",
                     model_file.string(), vocab_file.string());
  }
  const Vocab vocab = Vocab::load(vocab_file);
  const int64_t vocab_size = bert.value("vocab_size", int64_t{0});
  BERTLAB_CHECK_AS(ConfigError, vocab.size() <= vocab_size,
                   "{}: {} tokens, more than the model's vocab_size {}: the tokenizer would give "
                   "ids the word embedding does not have; pass the vocabulary it trained with",
                   vocab_file.string(), vocab.size(), vocab_size);
  const bool lower = metadata.count(kLowerCaseKey) == 0 || metadata.at(kLowerCaseKey) == "true";

  const fs::path& out = options.out_dir;
  fs::create_directories(out);
  const int64_t pad_id = vocab.find("[PAD]").value_or(0);
  write_file_atomic(out / "config.json", hf_config(bert, head, pad_id).dump(2) + "\n");
  const NamedTensors exported = tensors_for(head.architecture, tensors);
  write_safetensors(out / "model.safetensors", exported, {{"format", "pt"}});
  write_file_atomic(out / "vocab.txt", read_bytes(vocab_file));

  // Google's tokenizer: lower-casing strips accents too, Chinese characters are split, and
  // these are the special tokens its vocabularies hold.
  nlohmann::json special = nlohmann::json::object();
  for (const auto& [key, token] :
       std::vector<std::pair<const char*, const char*>>{{"cls_token", "[CLS]"},
                                                        {"mask_token", "[MASK]"},
                                                        {"pad_token", "[PAD]"},
                                                        {"sep_token", "[SEP]"},
                                                        {"unk_token", "[UNK]"}}) {
    if (vocab.find(token)) special[key] = token;
  }
  nlohmann::json tokenizer = special;
  tokenizer["tokenizer_class"] = "BertTokenizer";
  tokenizer["do_lower_case"] = lower;
  tokenizer["strip_accents"] = nullptr;  // follows do_lower_case, as Google's
  tokenizer["tokenize_chinese_chars"] = true;
  tokenizer["model_max_length"] = bert.value("max_position_embeddings", int64_t{512});
  tokenizer["clean_up_tokenization_spaces"] = true;
  write_file_atomic(out / "tokenizer_config.json", tokenizer.dump(2) + "\n");
  write_file_atomic(out / "special_tokens_map.json", special.dump(2) + "\n");

  return {head.architecture, static_cast<int64_t>(exported.size()),
          head.architecture == "BertForSequenceClassification"
              ? std::max<int64_t>(1, static_cast<int64_t>(head.labels.size()))
              : 0};
}

}  // namespace bertlab
