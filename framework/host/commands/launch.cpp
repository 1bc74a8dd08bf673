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

  std::vector<Rank> ranks(options.nproc);
  for (int r = 0; r < options.nproc; ++r) {
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
      const std::string n = std::to_string(options.nproc);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", n.c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "launch: cannot start %s: %s\n", argv[0], std::strerror(errno));
      std::_Exit(127);
    }
    ::close(fds[1]);
    ranks[r].pid = pid;
    ranks[r].fd = fds[0];
  }

  int first_failure = -1;
  int remaining = options.nproc;
  while (remaining > 0) {
    std::vector<pollfd> polls;
    std::vector<int> owners;
    for (int r = 0; r < options.nproc; ++r) {
      if (ranks[r].fd >= 0) {
        polls.push_back({ranks[r].fd, POLLIN, 0});
        owners.push_back(r);
      }
    }
    if (::poll(polls.data(), polls.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("launch: poll: {}", std::strerror(errno)));
    }
    for (size_t i = 0; i < polls.size(); ++i) {
      if (polls[i].revents == 0) continue;
      Rank& rank = ranks[owners[i]];
      char buffer[4096];
      ssize_t n = ::read(rank.fd, buffer, sizeof(buffer));
      if (n > 0) {
        rank.pending.append(buffer, static_cast<size_t>(n));
        size_t nl;
        while ((nl = rank.pending.find('\n')) != std::string::npos) {
          emit(owners[i], rank.pending.substr(0, nl));
          rank.pending.erase(0, nl + 1);
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // End of output: the rank is done.
      if (!rank.pending.empty()) emit(owners[i], rank.pending);
      ::close(rank.fd);
      rank.fd = -1;
      int status = 0;
      ::waitpid(rank.pid, &status, 0);
      rank.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      rank.how = WIFEXITED(status) ? fmt::format("exited with {}", rank.exit_code)
                                   : fmt::format("was killed by {} (exit code {})",
                                                 sigabbrev(WTERMSIG(status)), rank.exit_code);
      rank.done = true;
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
  if (first_failure >= 0) {
    log_line(LogLevel::kError, "comm",
             fmt::format("launch: rank {} failed first: it {}; the other ranks were stopped",
                         first_failure, ranks[first_failure].how));
    return ranks[first_failure].exit_code;
  }
  return 0;
}

}  // namespace bertlab
