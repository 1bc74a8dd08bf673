#pragma once
// Reading the JSON files of SQuAD (datasets, predictions, null odds), plain or zipped.

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace bertlab::squad {

/// The bytes of `path`; for a name ending in `.zip`, the one `.json` member of the archive
/// (directories and `__MACOSX/` entries ignored). Throws DataError naming the file (and the
/// members found) when it cannot be read or holds no single JSON member.
std::string read_json_text(const std::filesystem::path& path);

/// Parses `text` (read from `path`). Throws DataError "PATH:LINE:COLUMN: ..." for malformed
/// JSON, with the line and column of the byte where parsing failed.
nlohmann::json parse_json(const std::string& text, const std::filesystem::path& path);

/// read_json_text + parse_json.
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace bertlab::squad
