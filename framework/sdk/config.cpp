#include <bertlab/config.h>
#include <bertlab/error.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <mutex>

namespace bertlab {

const char* to_string(OptionType type) {
  switch (type) {
    case OptionType::kBool:
      return "bool";
    case OptionType::kInt:
      return "int";
    case OptionType::kFloat:
      return "float";
    case OptionType::kString:
      return "string";
    case OptionType::kPath:
      return "path";
  }
  return "?";
}

std::string format_value(const OptionValue& value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      std::string s = fmt::format("{}", v);
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
    std::string operator()(const std::string& v) const {
      // A TOML basic string: quotes, backslashes and control characters escaped.
      std::string out = "\"";
      for (char c : v) {
        switch (c) {
          case '"':
            out += "\\\"";
            break;
          case '\\':
            out += "\\\\";
            break;
          case '\n':
            out += "\\n";
            break;
          case '\t':
            out += "\\t";
            break;
          case '\r':
            out += "\\r";
            break;
          default:
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
              out += fmt::format("\\u{:04X}", static_cast<unsigned char>(c));
            } else {
              out += c;
            }
        }
      }
      return out + "\"";
    }
  };
  return std::visit(Visitor{}, value);
}

OptionDecl& OptionDecl::in_range(double lo, double hi) {
  min = lo;
  max = hi;
  return *this;
}

OptionDecl& OptionDecl::at_least(double lo) {
  min = lo;
  min_exclusive = false;
  return *this;
}

OptionDecl& OptionDecl::above(double lo) {
  min = lo;
  min_exclusive = true;
  return *this;
}

OptionDecl& OptionDecl::one_of(std::vector<std::string> values) {
  allowed = std::move(values);
  return *this;
}

OptionDecl& OptionDecl::mark_required() {
  required = true;
  return *this;
}

namespace {
std::string format_bound(double v) { return fmt::format("{}", v); }
}  // namespace

std::string OptionDecl::rule() const {
  if (!allowed.empty()) {
    std::string out = "one of ";
    for (size_t i = 0; i < allowed.size(); ++i) out += (i ? "|" : "") + allowed[i];
    return out;
  }
  if (min && max) {
    return fmt::format("in {}{}, {}]", min_exclusive ? "(" : "[", format_bound(*min),
                       format_bound(*max));
  }
  if (min) return fmt::format("{} {}", min_exclusive ? ">" : ">=", format_bound(*min));
  if (max) return fmt::format("<= {}", format_bound(*max));
  if (type == OptionType::kPath) {
    if (path_is_checkpoint) return "checkpoint";
    return path_is_directory ? "existing folder" : "existing file";
  }
  return "";
}

OptionDecl bool_option(std::string key, bool default_value, std::string doc) {
  OptionDecl d;
  d.key = std::move(key);
  d.type = OptionType::kBool;
  d.default_value = default_value;
  d.doc = std::move(doc);
  return d;
}

OptionDecl int_option(std::string key, int64_t default_value, std::string doc) {
  OptionDecl d;
  d.key = std::move(key);
  d.type = OptionType::kInt;
  d.default_value = default_value;
  d.doc = std::move(doc);
  return d;
}

OptionDecl float_option(std::string key, double default_value, std::string doc) {
  OptionDecl d;
  d.key = std::move(key);
  d.type = OptionType::kFloat;
  d.default_value = default_value;
  d.doc = std::move(doc);
  return d;
}

OptionDecl string_option(std::string key, std::string default_value, std::string doc) {
  OptionDecl d;
  d.key = std::move(key);
  d.type = OptionType::kString;
  d.default_value = std::move(default_value);
  d.doc = std::move(doc);
  return d;
}

OptionDecl path_option(std::string key, std::string doc) {
  OptionDecl d;
  d.key = std::move(key);
  d.type = OptionType::kPath;
  d.default_value = std::string();
  d.doc = std::move(doc);
  return d;
}

OptionDecl dir_option(std::string key, std::string doc) {
  OptionDecl d = path_option(std::move(key), std::move(doc));
  d.path_is_directory = true;
  return d;
}

OptionDecl checkpoint_option(std::string key, std::string doc) {
  OptionDecl d = path_option(std::move(key), std::move(doc));
  d.path_is_checkpoint = true;
  return d;
}

std::optional<std::string> check_value(const OptionDecl& decl, const OptionValue& value) {
  double number = 0;
  bool is_number = false;
  if (const auto* i = std::get_if<int64_t>(&value)) {
    number = static_cast<double>(*i);
    is_number = true;
  } else if (const auto* f = std::get_if<double>(&value)) {
    number = *f;
    is_number = true;
    if (!std::isfinite(number)) return fmt::format("must be a finite number, got {}", number);
  }
  if (is_number) {
    bool low_ok = !decl.min || (decl.min_exclusive ? number > *decl.min : number >= *decl.min);
    bool high_ok = !decl.max || number <= *decl.max;
    if (!low_ok || !high_ok) {
      return fmt::format("must be {}, got {}", decl.rule(), format_value(value));
    }
  }
  if (const auto* s = std::get_if<std::string>(&value); s && !decl.allowed.empty()) {
    if (std::find(decl.allowed.begin(), decl.allowed.end(), *s) == decl.allowed.end()) {
      return fmt::format("must be {}, got {}", decl.rule(), format_value(value));
    }
  }
  return std::nullopt;
}

namespace {

/// Guards every ConfigView's record of reads: the replicas of one run are threads that build
/// their strategy and optimizer from the same view at once.
std::mutex& reads_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

ConfigView::ConfigView(std::string section, std::vector<OptionDecl> decls,
                       std::map<std::string, OptionValue> values)
    : section_(std::move(section)), decls_(std::move(decls)), values_(std::move(values)) {}

const OptionValue& ConfigView::lookup(std::string_view key, OptionType expected) const {
  auto decl =
      std::find_if(decls_.begin(), decls_.end(), [&](const OptionDecl& d) { return d.key == key; });
  BERTLAB_CHECK(decl != decls_.end(), "[{}] {}: read of an undeclared option", section_, key);
  bool compatible = decl->type == expected ||
                    (expected == OptionType::kFloat && decl->type == OptionType::kInt) ||
                    (expected == OptionType::kString && decl->type == OptionType::kPath);
  BERTLAB_CHECK(compatible, "[{}] {}: declared as {}, read as {}", section_, key,
                to_string(decl->type), to_string(expected));
  {
    std::lock_guard<std::mutex> lock(reads_mutex());
    reads_.insert(std::string(key));
  }
  auto it = values_.find(std::string(key));
  if (it != values_.end()) return it->second;
  BERTLAB_CHECK(decl->default_value.has_value(), "[{}] {}: required option has no value", section_,
                key);
  return *decl->default_value;
}

bool ConfigView::get_bool(std::string_view key) const {
  return std::get<bool>(lookup(key, OptionType::kBool));
}

int64_t ConfigView::get_int(std::string_view key) const {
  return std::get<int64_t>(lookup(key, OptionType::kInt));
}

double ConfigView::get_float(std::string_view key) const {
  const OptionValue& v = lookup(key, OptionType::kFloat);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

std::string ConfigView::get_string(std::string_view key) const {
  return std::get<std::string>(lookup(key, OptionType::kString));
}

std::filesystem::path ConfigView::get_path(std::string_view key) const {
  return std::filesystem::path(std::get<std::string>(lookup(key, OptionType::kPath)));
}

bool ConfigView::has(std::string_view key) const { return values_.count(std::string(key)) > 0; }

std::vector<std::string> ConfigView::unread_keys() const {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(reads_mutex());
  for (const auto& [key, value] : values_) {
    if (reads_.find(key) == reads_.end()) out.push_back(key);
  }
  return out;
}

std::optional<std::string> closest_match(const std::string& word,
                                         const std::vector<std::string>& candidates) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t sub = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      }
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const auto& c : candidates) {
    size_t d = distance(word, c);
    if (!best || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // Close enough: a couple of typos, or a third of the word.
  if (best && best_distance <= std::max<size_t>(2, word.size() / 3)) return best;
  // Or one contains the other ("lr" in "learning_rate" is too far; "batch_size" in
  // "train_batch_size" is a likely meaning).
  for (const auto& c : candidates) {
    if (word.size() >= 4 && c.find(word) != std::string::npos) return c;
  }
  return std::nullopt;
}

}  // namespace bertlab
