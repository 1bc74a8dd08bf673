#include "squad_json.h"

#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zip.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>
#include <vector>

namespace bertlab::squad {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string read_plain(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot open the file", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw DataError(fmt::format("{}: read error", path.string()));
  return text.str();
}

struct ZipCloser {
  void operator()(zip_t* archive) const { zip_discard(archive); }
};

/// Members worth reading: not folders, not macOS resource forks.
bool is_json_member(std::string_view name) {
  return !name.empty() && name.back() != '/' && name.rfind("__MACOSX/", 0) != 0 &&
         ends_with(name, ".json");
}

std::string read_zip(const std::filesystem::path& path) {
  int error_code = 0;
  std::unique_ptr<zip_t, ZipCloser> archive(zip_open(path.c_str(), ZIP_RDONLY, &error_code));
  if (!archive) {
    zip_error_t error;
    zip_error_init_with_code(&error, error_code);
    const std::string reason = zip_error_strerror(&error);
    zip_error_fini(&error);
    throw DataError(fmt::format("{}: not a readable zip archive ({})", path.string(), reason));
  }
  std::vector<std::string> members;
  zip_uint64_t chosen = 0;
  const zip_int64_t count = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    const char* name = zip_get_name(archive.get(), static_cast<zip_uint64_t>(i), 0);
    if (name == nullptr || !is_json_member(name)) continue;
    members.emplace_back(name);
    chosen = static_cast<zip_uint64_t>(i);
  }
  if (members.size() != 1) {
    throw DataError(fmt::format(
        "{}: a SQuAD archive must hold exactly one .json file, found {}{}; unzip it and name "
        "the file",
        path.string(), members.size(),
        members.empty() ? "" : fmt::format(" ({})", fmt::join(members, ", "))));
  }
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_stat_index(archive.get(), chosen, 0, &stat) != 0 || (stat.valid & ZIP_STAT_SIZE) == 0) {
    throw DataError(fmt::format("{}: cannot read the size of {}", path.string(), members[0]));
  }
  zip_file_t* file = zip_fopen_index(archive.get(), chosen, 0);
  if (file == nullptr) {
    throw DataError(fmt::format("{}: cannot open {} ({})", path.string(), members[0],
                                zip_strerror(archive.get())));
  }
  std::string text(stat.size, '\0');
  const zip_int64_t got = zip_fread(file, text.data(), stat.size);
  const std::string reason = zip_file_strerror(file);
  zip_fclose(file);
  if (got < 0 || static_cast<zip_uint64_t>(got) != stat.size) {
    throw DataError(fmt::format("{}: {} is damaged ({})", path.string(), members[0], reason));
  }
  return text;
}

}  // namespace

std::string read_json_text(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw DataError(fmt::format("{}: no such file", path.string()));
  }
  return ends_with(path.string(), ".zip") ? read_zip(path) : read_plain(path);
}

nlohmann::json parse_json(const std::string& text, const std::filesystem::path& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the byte at which parsing failed.
    const size_t at = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + at, '\n'));
    const size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
    const size_t column = line_start == std::string::npos || at == 0 ? at + 1 : at - line_start;
    std::string what = e.what();
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line L, column C: ...".
    const size_t colon = what.find(": ", what.find("parse error"));
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw DataError(fmt::format("{}:{}:{}: malformed JSON: {}", path.string(), line, column, what));
  } catch (const nlohmann::json::exception& e) {
    // A number too large for a double (out_of_range.406): nlohmann gives no position.
    throw DataError(fmt::format("{}: malformed JSON: {}", path.string(), e.what()));
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json(read_json_text(path), path);
}

}  // namespace bertlab::squad
