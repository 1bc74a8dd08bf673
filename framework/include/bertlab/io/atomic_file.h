#pragma once
// Crash-safe writes: the content goes to a temporary file beside the target, is flushed, and
// is renamed over the target, so a reader never sees a half-written file.

#include <filesystem>
#include <string_view>

namespace bertlab {

/// Writes `contents` to `path` atomically (creating parent folders). Throws Error naming the path.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

}  // namespace bertlab
