#pragma once
// Crash-safe writes: the content goes to a temporary file beside the target, is flushed, and
// is renamed over the target, so a reader never sees a half-written file.

#include <filesystem>
#include <string_view>

namespace bertlab {

/// Writes `contents` to `path` atomically (creating parent folders). Throws Error naming the path.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

/// Flushes `dir`'s entries (the names renamed into it) to the disk, so a rename survives a
/// power loss as well as a crash. Throws Error naming the folder.
void sync_directory(const std::filesystem::path& dir);

}  // namespace bertlab
