// CommandLine: the commands' definitions, put to CLI11.

#include "commands/command_line.h"

#include <CLI/CLI.hpp>

namespace bertlab {

CommandLine CommandLine::subcommand(const std::string& name, const std::string& description) {
  return CommandLine(app_->add_subcommand(name, description));
}

void CommandLine::require_subcommand() { app_->require_subcommand(1); }

void CommandLine::positional(const std::string& name, std::string& value, const std::string& help) {
  app_->add_option(name, value, help)->required();
}

void CommandLine::positionals(const std::string& name, std::vector<std::string>& values,
                              const std::string& help, bool required) {
  app_->add_option(name, values, help)->required(required);
}

void CommandLine::option(const std::string& name, std::string& value, const std::string& help) {
  app_->add_option(name, value, help);
}

void CommandLine::option(const std::string& name, int& value, const std::string& help) {
  app_->add_option(name, value, help);
}

void CommandLine::option(const std::string& name, int64_t& value, const std::string& help) {
  app_->add_option(name, value, help);
}

void CommandLine::option(const std::string& name, double& value, const std::string& help) {
  app_->add_option(name, value, help);
}

void CommandLine::option(const std::string& name, std::vector<std::string>& values,
                         const std::string& help) {
  app_->add_option(name, values, help)->allow_extra_args(false);
}

void CommandLine::required_option(const std::string& name, std::string& value,
                                  const std::string& help) {
  app_->add_option(name, value, help)->required();
}

void CommandLine::optional_value_option(const std::string& name, std::string& value,
                                        const std::string& help) {
  app_->add_option(name, value, help)->expected(0, 1);
}

void CommandLine::flag(const std::string& name, bool& value, const std::string& help) {
  app_->add_flag(name, value, help);
}

bool CommandLine::parsed() const { return app_->parsed(); }

bool CommandLine::given(const std::string& name) const { return app_->count(name) > 0; }

}  // namespace bertlab
