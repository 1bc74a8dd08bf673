#pragma once
// Crash-safe writes, the one mechanism every output file goes through: the content goes to a
// temporary file beside the target, is flushed and fsync'd, and is renamed over the target (then
// the folder is fsync'd), so a reader never sees a half-written file and an earlier complete one
// is never lost to an interrupted write.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace bertlab {

/// A file written in pieces and put in place by commit(). Until then the bytes go to a temporary
/// file beside the target (`temp`, or TARGET.partial when empty). Left uncommitted (an exception,
/// a stop), the temporary file is removed — or kept when `keep_partial` is set, for a file a user
/// may want to read after an interruption (metrics.jsonl.partial).
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path, std::filesystem::path temp = {},
                      bool keep_partial = false);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Appends `bytes` (buffered).
  void write(std::string_view bytes);
  /// Hands what was written so far to the operating system, so that readers of the temporary
  /// file (tail -f) see it.
  void flush();
  /// Flushes, fsyncs, renames over the target and fsyncs the folder. Throws Error naming the file.
  void commit();
  /// The temporary file's path.
  const std::filesystem::path& temp_path() const { return temp_; }

 private:
  void close_fd();
  void write_all(std::string_view bytes);

  std::filesystem::path path_;
  std::filesystem::path temp_;
  bool keep_partial_;
  int fd_ = -1;
  std::string buffer_;
  uint64_t offset_ = 0;          ///< bytes handed to the file
  uint64_t writeback_from_ = 0;  ///< where the disk's writeback was last started
  bool committed_ = false;
};

/// Writes `contents` to `path` atomically (creating parent folders). Throws Error naming the path.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

/// Flushes `dir`'s entries (the names renamed into it) to the disk, so a rename survives a
/// power loss as well as a crash. Throws Error naming the folder.
void sync_directory(const std::filesystem::path& dir);

}  // namespace bertlab
