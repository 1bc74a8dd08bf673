// BertConfig: Google's bert_config.json, read and written with nlohmann/json, and the option
// declarations that let [model] override any of its fields.

#include <bertlab/error.h>
#include <bertlab/model/bert_config.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace bertlab {

namespace {

enum class FieldType { kInt, kFloat, kString };

// The activations Google's get_activation() knows, plus Hugging Face's names for the tanh
// approximation of GELU.
const std::vector<std::string>& known_activations() {
  static const std::vector<std::string> names = {"gelu", "gelu_new", "gelu_tanh",
                                                 "relu", "tanh",     "linear"};
  return names;
}

// One field of bert_config.json and where it lives in BertConfig.
struct Field {
  const char* key;
  FieldType type;
  int64_t BertConfig::*int_member = nullptr;
  double BertConfig::*float_member = nullptr;
  std::string BertConfig::*string_member = nullptr;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      {"vocab_size", FieldType::kInt, &BertConfig::vocab_size},
      {"hidden_size", FieldType::kInt, &BertConfig::hidden_size},
      {"num_hidden_layers", FieldType::kInt, &BertConfig::num_hidden_layers},
      {"num_attention_heads", FieldType::kInt, &BertConfig::num_attention_heads},
      {"intermediate_size", FieldType::kInt, &BertConfig::intermediate_size},
      {"hidden_act", FieldType::kString, nullptr, nullptr, &BertConfig::hidden_act},
      {"hidden_dropout_prob", FieldType::kFloat, nullptr, &BertConfig::hidden_dropout_prob},
      {"attention_probs_dropout_prob", FieldType::kFloat, nullptr,
       &BertConfig::attention_probs_dropout_prob},
      {"max_position_embeddings", FieldType::kInt, &BertConfig::max_position_embeddings},
      {"type_vocab_size", FieldType::kInt, &BertConfig::type_vocab_size},
      {"initializer_range", FieldType::kFloat, nullptr, &BertConfig::initializer_range},
  };
  return table;
}

const Field* find_field(const std::string& key) {
  const auto& table = fields();
  auto it = std::find_if(table.begin(), table.end(), [&](const Field& f) { return key == f.key; });
  return it == table.end() ? nullptr : &*it;
}

const char* type_name(FieldType type) {
  switch (type) {
    case FieldType::kInt:
      return "an integer";
    case FieldType::kFloat:
      return "a number";
    case FieldType::kString:
      return "a string";
  }
  return "?";
}

}  // namespace

BertConfig BertConfig::from_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw ConfigError(
        fmt::format("{}: cannot open the BERT config file; check bert_config_file", path.string()));
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse errors, numbers too large
    throw ConfigError(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
  if (!json.is_object()) {
    throw ConfigError(fmt::format("{}: a BERT config must be a JSON object, found {}",
                                  path.string(), json.type_name()));
  }
  BertConfig config;
  std::vector<std::string> problems;
  for (const Field& field : fields()) {
    auto it = json.find(field.key);
    if (it == json.end()) continue;  // as Google's from_dict: missing fields keep defaults
    const nlohmann::json& value = *it;
    bool ok = false;
    switch (field.type) {
      case FieldType::kInt:
        ok = value.is_number_integer();
        if (ok) config.*field.int_member = value.get<int64_t>();
        break;
      case FieldType::kFloat:
        ok = value.is_number();
        if (ok) config.*field.float_member = value.get<double>();
        break;
      case FieldType::kString:
        ok = value.is_string();
        if (ok) config.*field.string_member = value.get<std::string>();
        break;
    }
    if (!ok) {
      problems.push_back(fmt::format("{}: field \"{}\" must be {}, found {} {}", path.string(),
                                     field.key, type_name(field.type), value.type_name(),
                                     value.dump()));
    }
  }
  if (!problems.empty()) throw ConfigError(std::move(problems));
  return config;
}

std::vector<OptionDecl> BertConfig::field_options() {
  const BertConfig d;
  std::vector<OptionDecl> decls;
  decls.push_back(
      int_option("vocab_size", d.vocab_size, "size of the WordPiece vocabulary").at_least(1));
  decls.push_back(int_option("hidden_size", d.hidden_size, "width of the encoder").at_least(1));
  decls.push_back(
      int_option("num_hidden_layers", d.num_hidden_layers, "number of Transformer layers")
          .at_least(1));
  decls.push_back(int_option("num_attention_heads", d.num_attention_heads,
                             "attention heads per layer; must divide hidden_size")
                      .at_least(1));
  decls.push_back(
      int_option("intermediate_size", d.intermediate_size, "width of the feed-forward layer")
          .at_least(1));
  decls.push_back(string_option("hidden_act", d.hidden_act,
                                "feed-forward activation (gelu is the exact erf form)")
                      .one_of(known_activations()));
  decls.push_back(float_option("hidden_dropout_prob", d.hidden_dropout_prob,
                               "dropout after embeddings and every dense output")
                      .in_range(0, 1));
  decls.push_back(float_option("attention_probs_dropout_prob", d.attention_probs_dropout_prob,
                               "dropout on the attention probabilities")
                      .in_range(0, 1));
  decls.push_back(int_option("max_position_embeddings", d.max_position_embeddings,
                             "longest sequence the position embeddings cover")
                      .at_least(1));
  decls.push_back(
      int_option("type_vocab_size", d.type_vocab_size, "number of token types (segments)")
          .at_least(1));
  decls.push_back(float_option("initializer_range", d.initializer_range,
                               "stddev of the truncated-normal weight initializer")
                      .above(0));
  return decls;
}

void BertConfig::set_field(const std::string& key, const OptionValue& value) {
  const Field* field = find_field(key);
  if (field == nullptr) {
    throw ConfigError(fmt::format("BERT config has no field \"{}\"; see bert_config.json", key));
  }
  bool ok = false;
  switch (field->type) {
    case FieldType::kInt:
      if (const auto* i = std::get_if<int64_t>(&value)) {
        this->*field->int_member = *i;
        ok = true;
      }
      break;
    case FieldType::kFloat:
      if (const auto* f = std::get_if<double>(&value)) {
        this->*field->float_member = *f;
        ok = true;
      } else if (const auto* i = std::get_if<int64_t>(&value)) {
        this->*field->float_member = static_cast<double>(*i);
        ok = true;
      }
      break;
    case FieldType::kString:
      if (const auto* s = std::get_if<std::string>(&value)) {
        this->*field->string_member = *s;
        ok = true;
      }
      break;
  }
  if (!ok) {
    throw ConfigError(fmt::format("BERT config field \"{}\" must be {}, got {}", key,
                                  type_name(field->type), format_value(value)));
  }
}

void BertConfig::validate() const {
  std::vector<std::string> problems;
  auto positive = [&](const char* key, int64_t value) {
    if (value < 1)
      problems.push_back(fmt::format("BERT config: {} must be >= 1, got {}", key, value));
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("intermediate_size", intermediate_size);
  positive("max_position_embeddings", max_position_embeddings);
  positive("type_vocab_size", type_vocab_size);
  if (hidden_size >= 1 && num_attention_heads >= 1 && hidden_size % num_attention_heads != 0) {
    problems.push_back(
        fmt::format("BERT config: hidden_size ({}) must be a multiple of num_attention_heads ({}); "
                    "change one of them",
                    hidden_size, num_attention_heads));
  }
  auto probability = [&](const char* key, double value) {
    if (!(value >= 0.0 && value < 1.0)) {
      problems.push_back(fmt::format("BERT config: {} must be in [0, 1), got {}", key, value));
    }
  };
  probability("hidden_dropout_prob", hidden_dropout_prob);
  probability("attention_probs_dropout_prob", attention_probs_dropout_prob);
  if (!(initializer_range > 0.0)) {
    problems.push_back(
        fmt::format("BERT config: initializer_range must be > 0, got {}", initializer_range));
  }
  const auto& acts = known_activations();
  if (std::find(acts.begin(), acts.end(), hidden_act) == acts.end()) {
    problems.push_back(fmt::format("BERT config: hidden_act must be one of {}, got \"{}\"",
                                   fmt::join(acts, "|"), hidden_act));
  }
  if (!problems.empty()) throw ConfigError(std::move(problems));
}

std::string BertConfig::to_json() const {
  nlohmann::ordered_json json;
  // Google's to_json_string writes the keys sorted.
  std::vector<const Field*> sorted;
  for (const Field& field : fields()) sorted.push_back(&field);
  std::sort(sorted.begin(), sorted.end(),
            [](const Field* a, const Field* b) { return std::string(a->key) < b->key; });
  for (const Field* field : sorted) {
    switch (field->type) {
      case FieldType::kInt:
        json[field->key] = this->*field->int_member;
        break;
      case FieldType::kFloat:
        json[field->key] = this->*field->float_member;
        break;
      case FieldType::kString:
        json[field->key] = this->*field->string_member;
        break;
    }
  }
  return json.dump(2) + "\n";
}

}  // namespace bertlab
