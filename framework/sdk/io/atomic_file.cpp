// AtomicFile and write_file_atomic: temporary file, fsync, rename, fsync of the folder.

#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

/// Buffered bytes beyond this go to the file.
constexpr size_t kBufferBytes = size_t{1} << 20;
/// Written bytes beyond this since the last hint are handed to the disk's writeback at once, so
/// the fsync of commit() finds little left to write (RocksDB's bytes_per_sync).
constexpr uint64_t kWritebackBytes = uint64_t{8} << 20;

}  // namespace

AtomicFile::AtomicFile(fs::path path, fs::path temp, bool keep_partial)
    : path_(std::move(path)),
      temp_(temp.empty() ? fs::path(path_.string() + ".partial") : std::move(temp)),
      keep_partial_(keep_partial) {
  std::error_code ec;
  if (path_.has_parent_path()) fs::create_directories(path_.parent_path(), ec);
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  BERTLAB_CHECK(fd_ >= 0, "{}: cannot create: {}", temp_.string(), std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (keep_partial_) {
    try {
      flush();
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): best effort on the way out
    }
  }
  close_fd();
  if (!keep_partial_) {
    std::error_code ignored;
    fs::remove(temp_, ignored);  // an unfinished file never replaces the target
  }
}

void AtomicFile::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void AtomicFile::write(std::string_view bytes) {
  if (buffer_.size() + bytes.size() < kBufferBytes) {
    buffer_.append(bytes);
    return;
  }
  flush();
  write_all(bytes);  // large writes (checkpoints) go straight through, without a copy
}

void AtomicFile::flush() {
  write_all(buffer_);
  buffer_.clear();
}

void AtomicFile::write_all(std::string_view bytes) {
  BERTLAB_CHECK(fd_ >= 0, "{}: written after it was closed", temp_.string());
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(fmt::format("{}: write failed ({}); is the disk full?", temp_.string(),
                              std::strerror(errno)));
    }
    written += static_cast<size_t>(n);
  }
  offset_ += bytes.size();
  if (offset_ - writeback_from_ >= kWritebackBytes) {
#if defined(__linux__)
    // Starts the writeback without waiting for it; a failure only loses the head start.
    (void)::sync_file_range(fd_, static_cast<off_t>(writeback_from_),
                            static_cast<off_t>(offset_ - writeback_from_), SYNC_FILE_RANGE_WRITE);
#endif
    writeback_from_ = offset_;
  }
}

void AtomicFile::commit() {
  flush();
  const int rc = ::fsync(fd_);
  const int sync_err = errno;
  const int close_rc = ::close(fd_);
  fd_ = -1;
  BERTLAB_CHECK(rc == 0 && close_rc == 0, "{}: cannot flush to the disk: {}", temp_.string(),
                std::strerror(rc != 0 ? sync_err : errno));
  BERTLAB_CHECK(::rename(temp_.c_str(), path_.c_str()) == 0, "{}: cannot rename into place: {}",
                path_.string(), std::strerror(errno));
  committed_ = true;
  sync_directory(path_.has_parent_path() ? path_.parent_path() : fs::path("."));
}

void write_file_atomic(const fs::path& path, std::string_view contents) {
  static std::atomic<unsigned> counter{0};
  // A name of its own per call: two threads may write the same target.
  AtomicFile file(path, path.string() + fmt::format(".tmp.{}.{}", ::getpid(), counter++));
  file.write(contents);
  file.commit();
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  BERTLAB_CHECK(fd >= 0, "{}: cannot open the folder: {}", dir.string(), std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  BERTLAB_CHECK(rc == 0, "{}: cannot flush the folder: {}", dir.string(), std::strerror(err));
}

}  // namespace bertlab
