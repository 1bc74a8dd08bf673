#include <ATen/ATen.h>
#include <bertlab/model/weight_names.h>

#include <cctype>
#include <utility>

namespace bertlab {

namespace {

/// Whole-name pairs that follow no rule: the task heads of Google's scripts.
struct Special {
  const char* google;
  const char* bertlab;
};
constexpr Special kSpecials[] = {
    {"cls/predictions/output_bias", "cls.predictions.bias"},
    {"cls/seq_relationship/output_weights", "cls.seq_relationship.weight"},
    {"cls/seq_relationship/output_bias", "cls.seq_relationship.bias"},
    {"output_weights", "classifier.weight"},  // run_classifier.py's create_model
    {"output_bias", "classifier.bias"},
    {"cls/squad/output_weights", "qa_outputs.weight"},  // run_squad.py's create_model
    {"cls/squad/output_bias", "qa_outputs.bias"},
};

/// Slots that Google's and TensorFlow's optimizers keep beside each variable.
constexpr const char* kSlotSuffixes[] = {"/adam_m", "/adam_v", "/Adam",    "/Adam_1",
                                         "/lamb_m", "/lamb_v", "/Momentum"};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.push_back(sep);
    out += parts[i];
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

/// Whether a stored name is in Google's scheme (slash-separated, or one of its bare names).
bool is_google_style(const std::string& name) {
  return name.find('/') != std::string::npos || name == "global_step" || name == "output_weights" ||
         name == "output_bias";
}

}  // namespace

std::optional<MappedName> map_google_name(const std::string& tf_name, int64_t dims) {
  MappedName out;
  if (tf_name == "global_step") {
    out.kind = MappedName::Kind::kGlobalStep;
    return out;
  }
  for (const char* suffix : kSlotSuffixes) {
    if (ends_with(tf_name, suffix)) {
      out.kind = MappedName::Kind::kOptimizerSlot;
      return out;
    }
  }
  for (const auto& s : kSpecials) {
    if (tf_name == s.google) {
      out.name = s.bertlab;
      return out;
    }
  }
  if (!starts_with(tf_name, "bert/") && !starts_with(tf_name, "cls/predictions/transform/")) {
    return std::nullopt;
  }
  std::vector<std::string> parts = split(tf_name, '/');
  std::vector<std::string> mapped;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (starts_with(p, "layer_") && all_digits(p.substr(6)) && i > 0 && parts[i - 1] == "encoder") {
      mapped.push_back("layer");
      mapped.push_back(p.substr(6));
    } else {
      mapped.push_back(p);
    }
  }
  const std::string& last = parts.back();
  if (last == "kernel") {
    mapped.push_back("weight");
    out.transpose = dims == 2;
  } else if (last == "gamma") {
    mapped.push_back("weight");
  } else if (last == "beta" || last == "bias") {
    mapped.push_back("bias");
  } else if (ends_with(last, "_embeddings") && parts.size() == 3 && parts[1] == "embeddings") {
    mapped.push_back(last);
    mapped.push_back("weight");
  } else {
    return std::nullopt;
  }
  out.name = join(mapped, '.');
  return out;
}

MappedName map_hf_name(const std::string& name) {
  MappedName out;
  std::string n = name;
  // bert-base checkpoints of pytorch-pretrained-bert name LayerNorm's parameters gamma/beta.
  if (ends_with(n, "LayerNorm.gamma")) n = n.substr(0, n.size() - 5) + "weight";
  if (ends_with(n, "LayerNorm.beta")) n = n.substr(0, n.size() - 4) + "bias";
  // A bare BertModel's state dict has no "bert." prefix.
  for (const char* scope : {"embeddings.", "encoder.", "pooler."}) {
    if (starts_with(n, scope)) n = "bert." + n;
  }
  if (ends_with(n, "embeddings.position_ids")) out.kind = MappedName::Kind::kBuffer;
  out.name = n;
  return out;
}

std::optional<MappedName> google_name_of(const std::string& bertlab_name, int64_t dims) {
  MappedName out;
  for (const auto& s : kSpecials) {
    if (bertlab_name == s.bertlab) {
      out.name = s.google;
      return out;
    }
  }
  if (!starts_with(bertlab_name, "bert.") &&
      !starts_with(bertlab_name, "cls.predictions.transform.")) {
    return std::nullopt;
  }
  std::vector<std::string> parts = split(bertlab_name, '.');
  if (parts.size() < 2) return std::nullopt;
  std::vector<std::string> mapped;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i] == "layer" && i + 1 < parts.size() - 1 && all_digits(parts[i + 1])) {
      mapped.push_back("layer_" + parts[i + 1]);
      ++i;
    } else {
      mapped.push_back(parts[i]);
    }
  }
  const std::string& last = parts.back();
  const std::string& parent = parts[parts.size() - 2];
  if (last == "weight") {
    if (parent == "LayerNorm") {
      mapped.push_back("gamma");
    } else if (!ends_with(parent, "_embeddings")) {
      mapped.push_back("kernel");
      out.transpose = dims == 2;
    }
  } else if (last == "bias") {
    mapped.push_back(parent == "LayerNorm" ? "beta" : "bias");
  } else {
    return std::nullopt;
  }
  out.name = join(mapped, '/');
  return out;
}

NamedTensors to_bertlab_names(const Checkpoint& checkpoint, std::vector<SkippedTensor>* skipped) {
  NamedTensors out;
  auto skip = [&](const std::string& name, const char* reason) {
    if (skipped != nullptr) skipped->push_back({name, reason});
  };
  for (const auto& [name, tensor] : checkpoint.tensors) {
    std::optional<MappedName> mapped = is_google_style(name) ? map_google_name(name, tensor.dim())
                                                             : std::optional(map_hf_name(name));
    if (!mapped) {
      skip(name, "unknown name");
      continue;
    }
    switch (mapped->kind) {
      case MappedName::Kind::kWeight:
        out.emplace_back(mapped->name, mapped->transpose ? tensor.t().contiguous() : tensor);
        break;
      case MappedName::Kind::kOptimizerSlot:
        skip(name, "optimizer slot");
        break;
      case MappedName::Kind::kGlobalStep:
        skip(name, "global_step");
        break;
      case MappedName::Kind::kBuffer:
        skip(name, "buffer");
        break;
    }
  }
  return out;
}

NamedTensors to_google_names(const NamedTensors& weights, std::vector<SkippedTensor>* skipped) {
  NamedTensors out;
  for (const auto& [name, tensor] : weights) {
    std::optional<MappedName> mapped = google_name_of(name, tensor.dim());
    if (!mapped) {
      if (skipped != nullptr) skipped->push_back({name, "no Google name"});
      continue;
    }
    out.emplace_back(mapped->name, mapped->transpose ? tensor.t().contiguous() : tensor);
  }
  return out;
}

}  // namespace bertlab
