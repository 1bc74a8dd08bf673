// The `bertlab` executable users run. The data commands — `bertlab pretrain create-data` and
// `bertlab squad features` — run here, in a process that never loads libtorch (whose loading and
// operator registration is most of the 0.7 s every other command starts with); their code is the
// same the pretrain and squad plugins register. Every other command line, and these two when
// they name plugin folders (--plugin-dir, --allow-insecure-plugins), goes unchanged to
// `bertlab-host` beside this executable (app/main.cpp), which replaces this process.

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "exit_status.h"
#include "pretrain_tools.h"
#include "squad_tools.h"

namespace bertlab {
namespace {

using ToolMain = int (*)(const std::vector<std::string>&);

struct DataCommand {
  const char* group;
  const char* name;
  ToolMain main;
};

constexpr DataCommand kDataCommands[] = {
    {"pretrain", "create-data", pretrain::create_data_tool},
    {"squad", "features", squad::features_tool},
};

/// The data command argv names, if it names one and no host flag: `bertlab [--verbose] GROUP
/// TOOL ARGS...`.
const DataCommand* data_command(int argc, char** argv) {
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--plugin-dir", 0) == 0 || arg == "--allow-insecure-plugins") return nullptr;
    if (arg != "--verbose" && words.size() < 2) words.push_back(arg);
  }
  if (words.size() < 2) return nullptr;
  for (const auto& command : kDataCommands) {
    if (words[0] == command.group && words[1] == command.name) return &command;
  }
  return nullptr;
}

/// Replaces this process with bertlab-host, beside this executable, on the same argv.
int exec_host(char** argv) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path host =
      (ec ? std::filesystem::path(argv[0]).parent_path() : self.parent_path()) / "bertlab-host";
  ::execv(host.c_str(), argv);
  std::cerr << "error: cannot start " << host.string() << ": " << std::strerror(errno)
            << "; bertlab-host belongs beside bertlab (reinstall bertlab)\n";
  return kExitFailure;
}

}  // namespace
}  // namespace bertlab

int main(int argc, char** argv) {
  using namespace bertlab;
  const DataCommand* command = data_command(argc, argv);
  if (command == nullptr) return exec_host(argv);
  argc = take_verbose_flag(argc, argv);
  // argv is now bertlab GROUP TOOL ARGS...: the tool takes ARGS.
  const std::vector<std::string> args(argv + 3, argv + argc);
  try {
    return command->main(args);
  } catch (...) {
    return report_exception();
  }
}
