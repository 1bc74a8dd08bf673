#pragma once
// Shared helpers for the test suites: fixture paths, temporary folders, running the real
// bertlab executable.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bertlab {
class PluginHost;
}

namespace bertlab::testing {

/// The in-tree plugins of this build, loaded once per test process by the real host (kept
/// loaded until the process ends, as the executable does).
const PluginHost& builtin_plugins();

/// tests/data/<relative>.
std::filesystem::path data_path(const std::string& relative);

/// A fresh empty folder under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

/// Runs the built `bertlab` executable with `args` (stdin from `input`), capturing output.
CommandResult run_bertlab(const std::vector<std::string>& args, const std::string& input = "",
                          const std::vector<std::string>& env = {});

/// Runs `bertlab` as run_bertlab() does and sends it `signal` once `ready()` (polled every 10 ms)
/// returns true.
CommandResult run_bertlab_signalled(const std::vector<std::string>& args, int signal,
                                    const std::function<bool()>& ready);

/// Runs `bertlab` as run_bertlab() does with no file allowed to grow past `max_file_bytes`
/// (RLIMIT_FSIZE, as `ulimit -f`): writes past it fail as on a full disk.
CommandResult run_bertlab_file_limited(const std::vector<std::string>& args,
                                       int64_t max_file_bytes);

/// Reads a whole file.
std::string read_file(const std::filesystem::path& path);
/// Writes a whole file.
void write_file(const std::filesystem::path& path, const std::string& text);

/// The base of an experiment file on the test fixtures: `[experiment]` with `experiment_keys`
/// (lines, each ending in a newline), the tiny BERT, the classifier on 32 MRPC examples at
/// max_seq_length 32, `single`, and `adam_weight_decay` at `learning_rate` (as written in TOML).
std::string tiny_classifier_toml(const std::string& experiment_keys,
                                 const std::string& learning_rate);

/// One JSON value per non-empty line of a .jsonl file.
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path);

/// metrics.jsonl without its timing fields (what two equal runs must agree on).
std::string without_timings(const std::filesystem::path& path);

}  // namespace bertlab::testing
