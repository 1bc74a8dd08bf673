#pragma once
// Command-line flags in the style of Google's absl/tf.flags, as its BERT scripts take them
// (run_squad.py, create_pretraining_data.py): --name=value, --name value, -name, --flag /
// --noflag for booleans. Unknown flags are errors that name the closest known one.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bertlab {

class FlagSet {
 public:
  /// `command` is how the tool is invoked, e.g. "bertlab squad features" (for messages).
  explicit FlagSet(std::string command) : command_(std::move(command)) {}

  void add_bool(const std::string& name, bool default_value, std::string help);
  void add_string(const std::string& name, std::string default_value, std::string help);
  void add_int(const std::string& name, int64_t default_value, std::string help);
  void add_float(const std::string& name, double default_value, std::string help);
  /// `alias` (e.g. "-o") stands for flag `name`.
  void add_alias(const std::string& alias, const std::string& name);

  /// Parses `args`; returns the positional arguments. Throws ConfigError naming the flag and
  /// value for an unknown flag (with the closest known one), a missing value or a value of the
  /// wrong type. `--help` / `-h` set help_requested() instead.
  std::vector<std::string> parse(const std::vector<std::string>& args);

  bool help_requested() const { return help_; }
  /// One line per flag: name, default and help.
  std::string usage() const;
  /// Whether the flag was given on the command line.
  bool given(const std::string& name) const;

  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;

  /// The flags given on the command line, in order, as name → value text.
  const std::vector<std::pair<std::string, std::string>>& given_flags() const { return given_; }

 private:
  enum class Kind { kBool, kString, kInt, kFloat };
  struct Flag {
    Kind kind = Kind::kString;
    std::string text;  // the value as text (default or given)
    std::string help;
    bool given = false;
  };
  void add(const std::string& name, Kind kind, std::string default_text, std::string help);
  const Flag& find(const std::string& name) const;
  void set(const std::string& name, const std::string& value, const std::string& arg);

  std::string command_;
  std::map<std::string, Flag> flags_;
  std::vector<std::string> order_;  // declaration order, for usage()
  std::map<std::string, std::string> aliases_;
  std::vector<std::pair<std::string, std::string>> given_;
  bool help_ = false;
};

}  // namespace bertlab
