#pragma once
// `bertlab inspect CHECKPOINT`: format, tensor count, total parameters, and per tensor its name,
// dtype and shape (with --stats: mean, std, min, max).

#include <filesystem>
#include <ostream>

namespace bertlab {

/// Prints the table for the checkpoint `path` names (any format); returns 0. Throws DataError
/// for a file it cannot read.
int inspect_checkpoint(const std::filesystem::path& path, bool stats, std::ostream& out);

}  // namespace bertlab
