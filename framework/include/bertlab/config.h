#pragma once
// Option declarations and the typed view a component reads its options from.
//
// A component declares its options once (key, type, default, allowed range or values, doc).
// The host validates experiment files against the same declarations before any work starts,
// and `bertlab plugins --describe NAME` prints them. After validation a component receives a
// ConfigView holding only declared keys, converted to the declared types, with paths resolved.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace bertlab {

enum class OptionType { kBool, kInt, kFloat, kString, kPath };

/// "bool", "int", "float", "string", "path".
const char* to_string(OptionType type);

using OptionValue = std::variant<bool, int64_t, double, std::string>;

/// Formats a value as TOML would write it (strings quoted).
std::string format_value(const OptionValue& value);

/// One option of a component.
struct OptionDecl {
  std::string key;                           ///< key within the section
  OptionType type = OptionType::kString;     ///< declared type; an int is accepted for a float
  std::optional<OptionValue> default_value;  ///< none: required, or empty for paths
  bool required = false;                     ///< missing key is an error
  std::optional<double> min;                 ///< inclusive lower bound (int, float)
  std::optional<double> max;                 ///< inclusive upper bound (int, float)
  bool min_exclusive = false;                ///< the lower bound itself is not allowed
  std::vector<std::string> allowed;          ///< allowed values (string), empty: any
  std::string doc;                           ///< one line for --describe
  bool path_is_directory = false;            ///< kPath: must name a directory, not a file
  bool path_is_checkpoint = false;           ///< kPath: a checkpoint (file, TF prefix or folder)

  /// value >= lo and value <= hi.
  OptionDecl& in_range(double lo, double hi);
  /// value >= lo.
  OptionDecl& at_least(double lo);
  /// value > lo.
  OptionDecl& above(double lo);
  /// value is one of `values`.
  OptionDecl& one_of(std::vector<std::string> values);
  /// The key must be present.
  OptionDecl& mark_required();
  /// The rule as one phrase for messages and --describe: "in [0, 1]", "one of a|b", ...
  std::string rule() const;
};

OptionDecl bool_option(std::string key, bool default_value, std::string doc);
OptionDecl int_option(std::string key, int64_t default_value, std::string doc);
OptionDecl float_option(std::string key, double default_value, std::string doc);
OptionDecl string_option(std::string key, std::string default_value, std::string doc);
/// A file path, resolved against the experiment file's folder; must exist when non-empty.
OptionDecl path_option(std::string key, std::string doc);
/// A directory path, resolved against the experiment file's folder; must exist when non-empty.
OptionDecl dir_option(std::string key, std::string doc);

/// A checkpoint in any format bertlab reads (a file, a TensorFlow prefix such as
/// `bert_model.ckpt`, or a folder holding one), resolved like a path; checked when non-empty.
OptionDecl checkpoint_option(std::string key, std::string doc);

/// The closest of `candidates` to `word` (edit distance), when close enough to suggest
/// ("did you mean ...?" for keys, names and flags).
std::optional<std::string> closest_match(const std::string& word,
                                         const std::vector<std::string>& candidates);

/// Checks `value` against `decl` (type already converted). Returns what is wrong, or nothing.
std::optional<std::string> check_value(const OptionDecl& decl, const OptionValue& value);

/// The typed, validated options of one section (`task`, `optimizer`, ...).
/// Reads fall back to the declared default; reading an undeclared key is a programming error.
class ConfigView {
 public:
  ConfigView() = default;
  ConfigView(std::string section, std::vector<OptionDecl> decls,
             std::map<std::string, OptionValue> values);

  bool get_bool(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  /// Also accepts a value declared as int.
  double get_float(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  /// An absolute path (resolved by the host), or empty when unset.
  std::filesystem::path get_path(std::string_view key) const;
  /// True when the experiment set the key (not only its default).
  bool has(std::string_view key) const;

  const std::string& section() const { return section_; }
  const std::vector<OptionDecl>& declarations() const { return decls_; }
  const std::map<std::string, OptionValue>& values() const { return values_; }
  /// Keys that were set but never read by the component.
  std::vector<std::string> unread_keys() const;

 private:
  const OptionValue& lookup(std::string_view key, OptionType expected) const;

  std::string section_;
  std::vector<OptionDecl> decls_;
  std::map<std::string, OptionValue> values_;
  mutable std::set<std::string, std::less<>> reads_;
};

}  // namespace bertlab
