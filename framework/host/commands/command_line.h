#pragma once
// One command or subcommand of `bertlab`'s command line, as a command's definition sees it.
// CLI11 parses underneath; this is the one file of the commands that compiles CLI11's functions
// (header-only: each file calling them takes about 5 s longer to build on this 2-core machine).

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace bertlab {

class CommandLine {
 public:
  explicit CommandLine(CLI::App* app) : app_(app) {}

  /// A subcommand `name` of this command.
  CommandLine subcommand(const std::string& name, const std::string& description);
  /// This command needs one of its subcommands.
  void require_subcommand();

  /// A required positional argument.
  void positional(const std::string& name, std::string& value, const std::string& help);
  /// Positional arguments, one or more when `required` (after `--` too).
  void positionals(const std::string& name, std::vector<std::string>& values,
                   const std::string& help, bool required);

  /// `--name VALUE`.
  void option(const std::string& name, std::string& value, const std::string& help);
  void option(const std::string& name, int& value, const std::string& help);
  void option(const std::string& name, int64_t& value, const std::string& help);
  void option(const std::string& name, double& value, const std::string& help);
  /// `--name VALUE`, repeatable, one value per occurrence (so `--set a=1 FILE` leaves FILE to
  /// the positional).
  void option(const std::string& name, std::vector<std::string>& values, const std::string& help);
  /// `--name VALUE` that must be given.
  void required_option(const std::string& name, std::string& value, const std::string& help);
  /// `--name` alone or `--name VALUE`; given(name) tells whether it was on the command line.
  void optional_value_option(const std::string& name, std::string& value, const std::string& help);
  /// `--name` sets `value` to true; "--name{false}" sets it to false.
  void flag(const std::string& name, bool& value, const std::string& help);

  /// Whether the command line chose this command.
  bool parsed() const;
  /// Whether option `name` was on the command line.
  bool given(const std::string& name) const;

  CLI::App* app() const { return app_; }

 private:
  CLI::App* app_;
};

}  // namespace bertlab
