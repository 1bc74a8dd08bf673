#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace bertlab {

namespace fs = std::filesystem;

void write_file_atomic(const fs::path& path, std::string_view contents) {
  static std::atomic<unsigned> counter{0};
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = path.string() + fmt::format(".tmp.{}.{}", ::getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  BERTLAB_CHECK(fd >= 0, "{}: cannot create: {}", tmp.string(), std::strerror(errno));
  size_t written = 0;
  while (written < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      fs::remove(tmp, ec);
      throw Error(fmt::format("{}: write failed: {}", tmp.string(), std::strerror(err)));
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    fs::remove(tmp, ec);
    throw Error(fmt::format("{}: cannot flush: {}", tmp.string(), std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    fs::remove(tmp, ec);
    throw Error(fmt::format("{}: cannot rename into place: {}", path.string(), std::strerror(err)));
  }
  sync_directory(path.has_parent_path() ? path.parent_path() : fs::path("."));
}

void sync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  BERTLAB_CHECK(fd >= 0, "{}: cannot open the folder: {}", dir.string(), std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  BERTLAB_CHECK(rc == 0, "{}: cannot flush the folder: {}", dir.string(), std::strerror(err));
}

}  // namespace bertlab
