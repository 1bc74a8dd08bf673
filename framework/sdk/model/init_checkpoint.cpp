#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/model/bert.h>
#include <bertlab/model/init_checkpoint.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace bertlab {

namespace {

std::string shape_of(const at::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
}

const at::Tensor* find(const NamedTensors& weights, const std::string& name) {
  for (const auto& [n, t] : weights) {
    if (n == name) return &t;
  }
  return nullptr;
}

/// A field inferred from a weight's dimension, compared with the config's value.
void compare_dim(std::vector<std::string>& out, const NamedTensors& weights, const char* field,
                 int64_t expected, const std::string& tensor, int64_t dim, const char* what) {
  const at::Tensor* t = find(weights, tensor);
  if (t == nullptr || t->dim() <= dim) return;
  if (t->size(dim) != expected) {
    out.push_back(fmt::format("{}: bert_config says {}, the checkpoint's {} has {} {}", field,
                              expected, tensor, t->size(dim), what));
  }
}

}  // namespace

std::vector<std::string> config_mismatches(const BertConfig& config, const NamedTensors& weights,
                                           const std::map<std::string, std::string>& metadata) {
  std::vector<std::string> out;
  const std::string word = "bert.embeddings.word_embeddings.weight";
  compare_dim(out, weights, "vocab_size", config.vocab_size, word, 0, "rows");
  compare_dim(out, weights, "hidden_size", config.hidden_size, word, 1, "columns");
  compare_dim(out, weights, "max_position_embeddings", config.max_position_embeddings,
              "bert.embeddings.position_embeddings.weight", 0, "rows");
  compare_dim(out, weights, "type_vocab_size", config.type_vocab_size,
              "bert.embeddings.token_type_embeddings.weight", 0, "rows");
  compare_dim(out, weights, "intermediate_size", config.intermediate_size,
              "bert.encoder.layer.0.intermediate.dense.weight", 0, "rows");
  // Layers: the highest index present.
  int64_t layers = 0;
  const std::string prefix = "bert.encoder.layer.";
  for (const auto& [name, t] : weights) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t end = name.find('.', prefix.size());
    try {
      layers = std::max<int64_t>(layers, std::stoll(name.substr(prefix.size(), end)) + 1);
    } catch (const std::exception&) {
    }
  }
  if (layers > 0 && layers != config.num_hidden_layers) {
    out.push_back(
        fmt::format("num_hidden_layers: bert_config says {}, the checkpoint has {} layers",
                    config.num_hidden_layers, layers));
  }
  // What the shapes cannot tell (the number of heads), the stored config can.
  auto it = metadata.find("bert_config");
  if (it != metadata.end()) {
    try {
      const auto stored = nlohmann::json::parse(it->second);
      if (stored.contains("num_attention_heads") &&
          stored["num_attention_heads"].get<int64_t>() != config.num_attention_heads) {
        out.push_back(fmt::format("num_attention_heads: bert_config says {}, the checkpoint's {}",
                                  config.num_attention_heads,
                                  stored["num_attention_heads"].get<int64_t>()));
      }
    } catch (const std::exception&) {
      // Metadata that is not bertlab's: the shapes above still decide.
    }
  }
  return out;
}

std::string InitReport::to_json() const {
  nlohmann::ordered_json j;
  j["init_checkpoint"] = checkpoint.file.string();
  j["format"] = to_string(checkpoint.format);
  j["loaded"] = loaded;
  j["missing"] = missing;
  j["excluded"] = excluded;
  nlohmann::ordered_json unused_json = nlohmann::ordered_json::array();
  for (const auto& u : unused) unused_json.push_back({{"name", u.name}, {"reason", u.reason}});
  j["unused"] = unused_json;
  j["notes"] = notes;
  return j.dump(2) + "\n";
}

std::string InitReport::summary() const {
  std::map<std::string, int> reasons;
  for (const auto& u : unused) ++reasons[u.reason];
  std::vector<std::string> parts;
  for (const auto& [reason, n] : reasons) parts.push_back(fmt::format("{} {}", n, reason));
  std::string line = fmt::format("{} ({}): {} tensors loaded", checkpoint.file.string(),
                                 to_string(checkpoint.format), loaded.size());
  if (!parts.empty()) line += fmt::format("; unused: {}", fmt::join(parts, ", "));
  if (!excluded.empty()) line += fmt::format("; excluded: {}", fmt::join(excluded, ", "));
  line += missing.empty() ? "; every parameter found"
                          : fmt::format("; not in the checkpoint, initialized randomly: {}",
                                        fmt::join(missing, ", "));
  return line;
}

InitReport init_from_checkpoint(torch::nn::Module& model, const Checkpoint& checkpoint,
                                const BertConfig& config, const std::vector<std::string>& exclude) {
  InitReport report;
  report.checkpoint = checkpoint.location;
  const NamedTensors weights = to_bertlab_names(checkpoint, &report.unused);
  const std::string where =
      fmt::format("[model] init_checkpoint {}", checkpoint.location.file.string());

  std::vector<std::string> errors;
  for (const auto& m : config_mismatches(config, weights, checkpoint.metadata)) {
    errors.push_back(fmt::format("{}: {}; use the checkpoint's bert_config.json", where, m));
  }
  auto excluded = [&](const std::string& name) {
    for (const auto& part : exclude) {
      if (name.find(part) != std::string::npos) return true;
    }
    return false;
  };
  std::map<std::string, at::Tensor> params;
  for (const auto& item : model.named_parameters(true)) params[item.key()] = item.value();
  std::set<std::string> used;
  std::vector<std::pair<at::Tensor, const at::Tensor*>> copies;
  for (const auto& [name, tensor] : weights) {
    auto it = params.find(name);
    if (it == params.end()) {
      report.unused.push_back({name, "not a parameter of this model"});
      continue;
    }
    if (excluded(name)) {
      report.excluded.push_back(name);
      used.insert(name);
      continue;
    }
    if (!it->second.sizes().equals(tensor.sizes())) {
      errors.push_back(fmt::format(
          "{}: tensor {} has shape {} in the checkpoint but {} in the model; use the matching "
          "bert_config, or keep it initialized with [model] init_checkpoint_exclude = \"{}\"",
          where, name, shape_of(tensor), shape_of(it->second), name));
      continue;
    }
    copies.emplace_back(it->second, &tensor);
    used.insert(name);
    report.loaded.push_back(name);
  }
  if (!errors.empty()) throw ConfigError(errors);
  {
    c10::NoGradGuard no_grad;
    for (auto& [param, source] : copies) param.copy_(*source);
  }
  for (const auto& [name, t] : params) {
    if (used.count(name) == 0) report.missing.push_back(name);
  }
  // Hugging Face saves token-classification and masked-LM models without the pooler.
  if (std::any_of(report.missing.begin(), report.missing.end(),
                  [](const std::string& n) { return n.rfind("bert.pooler.", 0) == 0; })) {
    report.notes.push_back(
        "the checkpoint has no pooler (bert.pooler.dense): it is initialized randomly, so the "
        "pooled output starts untrained");
  }
  return report;
}

}  // namespace bertlab
