// `bertlab launch`: N local processes as the ranks of one run, their output prefixed by rank.

#include "commands/launch.h"

#include <arpa/inet.h>
#include <bertlab/error.h>
#include <bertlab/log.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "commands/commands.h"
#include "runtime/child_process.h"

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

/// Starts rank `r` of `world` running `command` with torchrun's variables.
ChildProcess start_rank(int r, int world, int port, const std::vector<std::string>& command) {
  const std::string n = std::to_string(world);
  return start_child(command,
                     {{"RANK", std::to_string(r)},
                      {"LOCAL_RANK", std::to_string(r)},
                      {"WORLD_SIZE", n},
                      {"LOCAL_WORLD_SIZE", n},
                      {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", std::to_string(port)}},
                     "launch");
}

/// Forwards the ranks' output until every rank is done; the first to fail stops the others.
/// Returns the first failed rank, or -1.
int watch(std::vector<ChildProcess>& ranks) {
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
      ChildProcess& rank = ranks[owners[i]];
      if (polls[i].revents == 0 || forward_output(rank, fmt::format("[rank {}] ", owners[i]))) {
        continue;
      }
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
  if (command[0] == "bertlab") command[0] = self_executable();
  log_info("comm", "launch: {} ranks, MASTER_ADDR=127.0.0.1 MASTER_PORT={}", options.nproc, port);

  std::vector<ChildProcess> ranks;
  ranks.reserve(static_cast<size_t>(options.nproc));
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
