#include "runtime/child_process.h"

#include <bertlab/error.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace bertlab {

namespace {

/// SIGKILL, SIGSEGV, ... (signal 42 when the C library has no name for it).
std::string sigabbrev(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name != nullptr ? fmt::format("SIG{}", name) : fmt::format("signal {}", signal);
}

void emit(const std::string& prefix, const std::string& line) {
  const std::string out = prefix + line + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

ChildProcess start_child(const std::vector<std::string>& command,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         const std::string& what) {
  BERTLAB_CHECK(!command.empty(), "{}: no command to start", what);
  int fds[2];
  BERTLAB_CHECK(::pipe(fds) == 0, "{}: pipe: {}", what, std::strerror(errno));
  // Everything the child needs, built before fork: after it only async-signal-safe calls.
  std::vector<char*> argv;
  argv.reserve(command.size() + 1);
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  BERTLAB_CHECK(pid >= 0, "{}: fork: {}", what, std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "%s: cannot start %s: %s\n", what.c_str(), argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::close(fds[1]);
  ChildProcess child;
  child.pid = pid;
  child.fd = fds[0];
  return child;
}

bool forward_output(ChildProcess& child, const std::string& prefix) {
  char buffer[4096];
  const ssize_t n = ::read(child.fd, buffer, sizeof(buffer));
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    if (!child.pending.empty()) emit(prefix, child.pending);
    child.pending.clear();
    return false;
  }
  child.pending.append(buffer, static_cast<size_t>(n));
  size_t nl;
  while ((nl = child.pending.find('\n')) != std::string::npos) {
    emit(prefix, child.pending.substr(0, nl));
    child.pending.erase(0, nl + 1);
  }
  return true;
}

void reap(ChildProcess& child) {
  ::close(child.fd);
  child.fd = -1;
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  child.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  child.how = WIFEXITED(status) ? fmt::format("exited with {}", child.exit_code)
                                : fmt::format("was killed by {} (exit code {})",
                                              sigabbrev(WTERMSIG(status)), child.exit_code);
  child.done = true;
}

std::string self_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

}  // namespace bertlab
