// `bertlab launch`: N local processes as the ranks of one run, their output prefixed by rank.

#include "commands/launch.h"

#include <arpa/inet.h>
#include <bertlab/error.h>
#include <bertlab/log.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "commands/commands.h"

namespace bertlab {

namespace {

/// A port nobody listens on right now (the OS picks it).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BERTLAB_CHECK(fd >= 0, "launch: socket: {}", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw Error(fmt::format("launch: cannot find a free port: {}", std::strerror(errno)));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct Rank {
  pid_t pid = -1;
  int fd = -1;          // read end of the rank's merged stdout/stderr
  std::string pending;  // output not yet ending in a newline
  bool done = false;
  int exit_code = 0;
  std::string how;  // "exited with 3", "was killed by SIGKILL (exit code 137)"
};

/// SIGKILL, SIGSEGV, ... (signal 42 when the C library has no name for it).
std::string sigabbrev(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name != nullptr ? fmt::format("SIG{}", name) : fmt::format("signal {}", signal);
}

void emit(int rank, const std::string& line) {
  std::string out = fmt::format("[rank {}] {}\n", rank, line);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

/// Starts rank `r` of `world` running `command` with torchrun's variables; its stdout and
/// stderr go to a pipe whose read end the returned Rank holds.
Rank start_rank(int r, int world, int port, const std::vector<std::string>& command) {
  int fds[2];
  BERTLAB_CHECK(::pipe(fds) == 0, "launch: pipe: {}", std::strerror(errno));
  pid_t pid = ::fork();
  BERTLAB_CHECK(pid >= 0, "launch: fork: {}", std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    const std::string n = std::to_string(world);
    ::setenv("RANK", std::to_string(r).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
    ::setenv("WORLD_SIZE", n.c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "launch: cannot start %s: %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::close(fds[1]);
  Rank rank;
  rank.pid = pid;
  rank.fd = fds[0];
  return rank;
}

/// Reads what rank `r` wrote and prints its complete lines. Returns false at the end of its
/// output (the rank is done).
bool forward_output(int r, Rank& rank) {
  char buffer[4096];
  ssize_t n = ::read(rank.fd, buffer, sizeof(buffer));
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    if (!rank.pending.empty()) emit(r, rank.pending);
    return false;
  }
  rank.pending.append(buffer, static_cast<size_t>(n));
  size_t nl;
  while ((nl = rank.pending.find('\n')) != std::string::npos) {
    emit(r, rank.pending.substr(0, nl));
    rank.pending.erase(0, nl + 1);
  }
  return true;
}

/// Waits for the finished rank's process and records how it ended.
void reap(Rank& rank) {
  ::close(rank.fd);
  rank.fd = -1;
  int status = 0;
  ::waitpid(rank.pid, &status, 0);
  rank.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  rank.how = WIFEXITED(status) ? fmt::format("exited with {}", rank.exit_code)
                               : fmt::format("was killed by {} (exit code {})",
                                             sigabbrev(WTERMSIG(status)), rank.exit_code);
  rank.done = true;
}

/// Forwards the ranks' output until every rank is done; the first to fail stops the others.
/// Returns the first failed rank, or -1.
int watch(std::vector<Rank>& ranks) {
  int first_failure = -1;
  size_t remaining = ranks.size();
  while (remaining > 0) {
    std::vector<pollfd> polls;
    std::vector<int> owners;
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (ranks[r].fd >= 0) {
        polls.push_back({ranks[r].fd, POLLIN, 0});
        owners.push_back(static_cast<int>(r));
      }
    }
    if (::poll(polls.data(), polls.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("launch: poll: {}", std::strerror(errno)));
    }
    for (size_t i = 0; i < polls.size(); ++i) {
      Rank& rank = ranks[owners[i]];
      if (polls[i].revents == 0 || forward_output(owners[i], rank)) continue;
      reap(rank);
      --remaining;
      if (rank.exit_code != 0 && first_failure < 0) {
        first_failure = owners[i];
        log_warning("comm", "launch: rank {} {}; stopping the other ranks", owners[i], rank.how);
        for (auto& other : ranks) {
          if (!other.done) ::kill(-other.pid, SIGTERM);
        }
      }
    }
  }
  return first_failure;
}

}  // namespace

int launch_processes(const LaunchOptions& options) {
  BERTLAB_CHECK_AS(ConfigError, options.nproc >= 1, "launch --nproc: must be >= 1, got {}",
                   options.nproc);
  BERTLAB_CHECK_AS(ConfigError, !options.command.empty(),
                   "launch: no command; write `bertlab launch --nproc N -- bertlab run EXP.toml`");
  const int port = options.master_port > 0 ? options.master_port : free_port();
  std::vector<std::string> command = options.command;
  if (command[0] == "bertlab") command[0] = std::filesystem::read_symlink("/proc/self/exe");
  log_info("comm", "launch: {} ranks, MASTER_ADDR=127.0.0.1 MASTER_PORT={}", options.nproc, port);

  std::vector<Rank> ranks;
  for (int r = 0; r < options.nproc; ++r) {
    ranks.push_back(start_rank(r, options.nproc, port, command));
  }
  const int first_failure = watch(ranks);
  if (first_failure >= 0) {
    log_line(LogLevel::kError, "comm",
             fmt::format("launch: rank {} failed first: it {}; the other ranks were stopped",
                         first_failure, ranks[first_failure].how));
    return ranks[first_failure].exit_code;
  }
  return 0;
}

// `bertlab launch [--nproc N] [--master-port P] -- COMMAND...`: everything after `--` is the
// ranks' command line, passed through untouched.
Command define_launch_command(CommandLine& parent, PluginOptions& /*plugins*/) {
  auto options = std::make_shared<LaunchOptions>();
  CommandLine command = parent.subcommand(
      "launch", "start N local processes as the ranks of one run, with torchrun's variables");
  command.option("--nproc", options->nproc, "processes (ranks) to start (default 2)");
  command.option("--master-port", options->master_port,
                 "rank 0's store port (MASTER_PORT); 0: a free one");
  command.positionals("command", options->command,
                      "after --: the ranks' program and arguments (bertlab: this executable)",
                      /*required=*/false);
  return {command, [options] { return launch_processes(*options); }};
}

}  // namespace bertlab
