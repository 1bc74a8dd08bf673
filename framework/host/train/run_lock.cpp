#include "train/run_lock.h"

#include <bertlab/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown host";
  return name;
}

/// This process's command line, its arguments joined by spaces (from /proc/self/cmdline).
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

/// What the holder wrote into the lock file, on one line.
std::string read_holder(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string holder = text.str();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  for (char& c : holder) {
    if (c == '\n') c = ';';
  }
  return holder.empty() ? "a process that has not yet written its name" : holder;
}

}  // namespace

RunFolderLock::RunFolderLock(const fs::path& dir, const std::string& what) {
  fs::create_directories(dir);
  const fs::path file = dir / kFileName;
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  BERTLAB_CHECK(fd_ >= 0, "cannot open the run lock {}: {}", file.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    BERTLAB_CHECK(error == EWOULDBLOCK, "cannot lock {}: {}", file.string(), std::strerror(error));
    throw Error(fmt::format(
        "{}: {} is being written by another run ({}); nothing of it was touched. Wait for it to "
        "finish, stop it, or give this run another --output-dir",
        what, dir.string(), read_holder(file)));
  }
  // Ours: record who holds it (the previous holder's text replaced).
  const std::string holder = fmt::format("host {}, pid {}, since {}, command: {}\n", host_name(),
                                         ::getpid(), utc_now(), command_line());
  if (::ftruncate(fd_, 0) == 0) {
    ssize_t written = ::pwrite(fd_, holder.data(), holder.size(), 0);
    (void)written;  // the record only improves a message; the lock is what matters
  }
}

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace bertlab
