// absl-style flag parsing for the SQuAD tools.

#include <bertlab/absl_flags.h>

#include <bertlab/config.h>
#include <bertlab/error.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

#include <bertlab/io/python_json.h>

namespace bertlab {

void FlagSet::add(const std::string& name, Kind kind, std::string default_text, std::string help) {
  flags_[name] = Flag{kind, std::move(default_text), std::move(help), false};
  order_.push_back(name);
}

void FlagSet::add_bool(const std::string& name, bool default_value, std::string help) {
  add(name, Kind::kBool, default_value ? "true" : "false", std::move(help));
}
void FlagSet::add_string(const std::string& name, std::string default_value, std::string help) {
  add(name, Kind::kString, std::move(default_value), std::move(help));
}
void FlagSet::add_int(const std::string& name, int64_t default_value, std::string help) {
  add(name, Kind::kInt, std::to_string(default_value), std::move(help));
}
void FlagSet::add_float(const std::string& name, double default_value, std::string help) {
  add(name, Kind::kFloat, python_float_repr(default_value), std::move(help));
}
void FlagSet::add_alias(const std::string& alias, const std::string& name) {
  aliases_[alias] = name;
}

namespace {

std::optional<bool> parse_bool(const std::string& text) {
  if (text == "true" || text == "True" || text == "1" || text == "t") return true;
  if (text == "false" || text == "False" || text == "0" || text == "f") return false;
  return std::nullopt;
}

}  // namespace

void FlagSet::set(const std::string& name, const std::string& value, const std::string& arg) {
  Flag& flag = flags_.at(name);
  switch (flag.kind) {
    case Kind::kBool:
      if (!parse_bool(value)) {
        throw ConfigError(
            fmt::format("{}: {}: \"{}\" is not a boolean; write --{}=true or --{}=false", command_,
                        arg, value, name, name));
      }
      break;
    case Kind::kInt: {
      errno = 0;
      char* end = nullptr;
      std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno != 0) {
        throw ConfigError(fmt::format("{}: {}: \"{}\" is not an integer", command_, arg, value));
      }
      break;
    }
    case Kind::kFloat: {
      errno = 0;
      char* end = nullptr;
      std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || errno != 0) {
        throw ConfigError(fmt::format("{}: {}: \"{}\" is not a number", command_, arg, value));
      }
      break;
    }
    case Kind::kString:
      break;
  }
  flag.text = value;
  flag.given = true;
  given_.emplace_back(name, value);
}

std::vector<std::string> FlagSet::parse(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional.insert(positional.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg == "--help" || arg == "-h" || arg == "--helpfull") {
      help_ = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::optional<std::string> inline_value;
    if (const auto eq = body.find('='); eq != std::string::npos) {
      inline_value = body.substr(eq + 1);
      body.resize(eq);
    }
    std::string name = body;
    if (const auto alias = aliases_.find(arg.substr(0, arg.find('='))); alias != aliases_.end()) {
      name = alias->second;
    }
    auto it = flags_.find(name);
    // absl's --noflag for booleans.
    if (it == flags_.end() && name.rfind("no", 0) == 0 && !inline_value) {
      const auto negated = flags_.find(name.substr(2));
      if (negated != flags_.end() && negated->second.kind == Kind::kBool) {
        set(negated->first, "false", arg);
        continue;
      }
    }
    if (it == flags_.end()) {
      auto close = closest_match(name, order_);
      throw ConfigError(fmt::format("{}: unknown flag {}{}; `{} --help` lists the flags", command_,
                                    arg, close ? fmt::format(" (did you mean --{}?)", *close) : "",
                                    command_));
    }
    if (inline_value) {
      set(name, *inline_value, arg);
    } else if (it->second.kind == Kind::kBool) {
      set(name, "true", arg);
    } else if (i + 1 < args.size()) {
      set(name, args[++i], arg);
    } else {
      throw ConfigError(fmt::format("{}: {} needs a value: write {}=VALUE", command_, arg, arg));
    }
  }
  return positional;
}

std::string FlagSet::usage() const {
  std::string out = fmt::format("usage: {} [flags]\n", command_);
  for (const auto& name : order_) {
    const Flag& flag = flags_.at(name);
    out += fmt::format("  --{} (default: {})\n      {}\n", name,
                       flag.text.empty() ? "\"\"" : flag.text, flag.help);
  }
  return out;
}

const FlagSet::Flag& FlagSet::find(const std::string& name) const {
  const auto it = flags_.find(name);
  BERTLAB_CHECK(it != flags_.end(), "flag --{} was never declared", name);
  return it->second;
}

bool FlagSet::given(const std::string& name) const { return find(name).given; }
bool FlagSet::get_bool(const std::string& name) const { return *parse_bool(find(name).text); }
const std::string& FlagSet::get_string(const std::string& name) const { return find(name).text; }
int64_t FlagSet::get_int(const std::string& name) const {
  return std::strtoll(find(name).text.c_str(), nullptr, 10);
}
double FlagSet::get_float(const std::string& name) const {
  return std::strtod(find(name).text.c_str(), nullptr);
}

}  // namespace bertlab
