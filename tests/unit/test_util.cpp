#include "test_util.h"

#include "runtime/plugin_host.h"

#include <fmt/format.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace bertlab::testing {

namespace fs = std::filesystem;

const PluginHost& builtin_plugins() {
  static const PluginHost* host = [] {
    auto* h = new PluginHost();  // never unloaded: factories point into the libraries
    h->load_directories({PluginHost::builtin_plugin_dir()});
    return h;
  }();
  return *host;
}

fs::path data_path(const std::string& relative) {
  return fs::path(BERTLAB_TEST_DATA_DIR) / relative;
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  path_ =
      fs::temp_directory_path() / ("bertlab-test-" + std::to_string(::getpid()) + "-" +
                                   std::to_string(counter++) + "-" + std::to_string(rd() % 100000));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& path, const std::string& text) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

namespace {

CommandResult run_command(const std::vector<std::string>& args, const std::string& input,
                          const std::vector<std::string>& env, int signal,
                          const std::function<bool()>& ready, int64_t max_file_bytes = -1) {
  TempDir tmp;
  const fs::path in_path = tmp / "stdin";
  const fs::path out_path = tmp / "stdout";
  const fs::path err_path = tmp / "stderr";
  write_file(in_path, input);
  // Created here: a signal that lands before the child has reopened its streams leaves them
  // empty, not missing.
  write_file(out_path, "");
  write_file(err_path, "");

  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (!std::freopen(in_path.c_str(), "rb", stdin) ||
        !std::freopen(out_path.c_str(), "wb", stdout) ||
        !std::freopen(err_path.c_str(), "wb", stderr)) {
      std::_Exit(127);
    }
    for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
    if (max_file_bytes >= 0) {
      // As `ulimit -f`: a write past the limit fails with EFBIG (SIGXFSZ ignored, as it stays
      // across exec) instead of killing the process.
      ::signal(SIGXFSZ, SIG_IGN);
      const rlimit limit{static_cast<rlim_t>(max_file_bytes), static_cast<rlim_t>(max_file_bytes)};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) std::_Exit(126);
    }
    std::vector<char*> argv;
    std::string exe = BERTLAB_EXECUTABLE;
    argv.push_back(exe.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    std::_Exit(127);
  }
  int status = 0;
  if (ready) {
    bool sent = false;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (!sent && ready()) {
        ::kill(pid, signal);
        sent = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } else {
    ::waitpid(pid, &status, 0);
  }
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  return result;
}

}  // namespace

CommandResult run_bertlab(const std::vector<std::string>& args, const std::string& input,
                          const std::vector<std::string>& env) {
  return run_command(args, input, env, 0, nullptr);
}

CommandResult run_bertlab_signalled(const std::vector<std::string>& args, int signal,
                                    const std::function<bool()>& ready) {
  return run_command(args, "", {}, signal, ready);
}

CommandResult run_bertlab_file_limited(const std::vector<std::string>& args,
                                       int64_t max_file_bytes) {
  return run_command(args, "", {}, 0, nullptr, max_file_bytes);
}

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

std::string without_timings(const std::filesystem::path& path) {
  std::string out;
  for (auto j : read_jsonl(path)) {
    for (const char* timing :
         {"examples_per_second", "elapsed_s", "data_s", "compute_s", "comm_s", "optimizer_s"}) {
      j.erase(timing);
    }
    out += j.dump() + "\n";
  }
  return out;
}

std::string tiny_classifier_toml(const std::string& experiment_keys,
                                 const std::string& learning_rate) {
  return fmt::format(R"([experiment]
{}
[model]
bert_config_file = "{}"
vocab_file = "{}"

[task]
plugin = "classifier"
task_name = "mrpc"
data_dir = "{}"
max_seq_length = 32

[strategy]
plugin = "single"

[optimizer]
plugin = "adam_weight_decay"
learning_rate = {}
)",
                     experiment_keys, data_path("experiments/bert_config_tiny.json").string(),
                     data_path("vocab/bert-base-uncased/vocab.txt").string(),
                     data_path("experiments/mrpc32").string(), learning_rate);
}

}  // namespace bertlab::testing
