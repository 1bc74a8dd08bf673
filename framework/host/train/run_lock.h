#pragma once
// The lock a run holds on its folder while it writes there, so that a second bertlab started on
// the same variant stops at once, naming the holder, instead of interleaving its files.

#include <filesystem>
#include <string>

namespace bertlab {

/// An advisory lock (flock) on DIR/.bertlab.lock, held from construction to destruction. flock
/// is released by the kernel when the holder exits, however it exits, so a stale lock file never
/// blocks a later run; on NFS Linux emulates it with a byte-range lock the server arbitrates, so
/// it also holds between hosts sharing the folder. The file records the holder (host, process id,
/// start time, command) for the message a second run prints.
class RunFolderLock {
 public:
  /// Creates DIR when missing and takes the lock; throws Error naming the holder when another
  /// process (or another lock in this one) has it. `what` names the run in the message, e.g.
  /// "variant 'adam' of quickstart".
  RunFolderLock(const std::filesystem::path& dir, const std::string& what);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

  /// The lock file's name inside the folder.
  static constexpr const char* kFileName = ".bertlab.lock";

 private:
  int fd_ = -1;  // the open lock file; closing it releases the lock
};

}  // namespace bertlab
