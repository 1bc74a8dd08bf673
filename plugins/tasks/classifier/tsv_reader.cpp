#include "tsv_reader.h"

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>

#include <fstream>
#include <sstream>
#include <string_view>

namespace bertlab::classifier {

namespace {

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

std::vector<std::string> split_fields(std::string_view line) {
  std::vector<std::string> fields;
  if (line.empty()) return fields;  // csv.reader yields [] for an empty line
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    if (tab == std::string_view::npos) {
      fields.emplace_back(line.substr(start));
      return fields;
    }
    fields.emplace_back(line.substr(start, tab - start));
    start = tab + 1;
  }
}

std::string read_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  BERTLAB_CHECK_AS(DataError, std::filesystem::is_regular_file(path, ec),
                   "{}: no such file; check the task's data_dir", path.string());
  std::ifstream in(path, std::ios::binary);
  BERTLAB_CHECK_AS(DataError, in.good(), "{}: cannot open the file for reading", path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  BERTLAB_CHECK_AS(DataError, !in.bad(), "{}: read error", path.string());
  return buffer.str();
}

/// The 1-based line (as parse_tsv counts lines) of byte `offset` of `text`.
int64_t line_of_offset(std::string_view text, size_t offset) {
  int64_t line = 1;
  for (size_t i = 0; i < offset; ++i) {
    const bool crlf_first_half = text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n';
    if ((text[i] == '\n' || text[i] == '\r') && !crlf_first_half) ++line;
  }
  return line;
}

}  // namespace

std::vector<TextLine> split_lines(const std::string& text) {
  std::string_view rest(text);
  if (rest.substr(0, kUtf8Bom.size()) == kUtf8Bom) rest.remove_prefix(kUtf8Bom.size());
  std::vector<TextLine> lines;
  int64_t line_number = 0;
  while (!rest.empty()) {
    const size_t end = rest.find_first_of("\r\n");
    lines.push_back(TextLine{++line_number, std::string(rest.substr(0, end))});
    if (end == std::string_view::npos) break;  // last line without a terminator
    const bool crlf = rest[end] == '\r' && end + 1 < rest.size() && rest[end + 1] == '\n';
    rest.remove_prefix(end + (crlf ? 2 : 1));
  }
  return lines;
}

std::vector<TsvRow> parse_tsv(const std::string& text) {
  std::vector<TsvRow> rows;
  for (const TextLine& line : split_lines(text)) {
    rows.push_back(TsvRow{line.line, split_fields(line.text)});
  }
  return rows;
}

std::vector<TextLine> read_lines(const std::filesystem::path& path) {
  const std::string text = read_bytes(path);
  if (const auto bad = find_invalid_utf8(text)) {
    throw DataError(
        fmt::format("{}:{}: invalid UTF-8 at byte offset {}; the GLUE readers "
                    "expect UTF-8 text",
                    path.string(), line_of_offset(text, *bad), *bad));
  }
  return split_lines(text);
}

std::vector<TsvRow> read_tsv(const std::filesystem::path& path) {
  std::vector<TsvRow> rows;
  for (const TextLine& line : read_lines(path)) {
    rows.push_back(TsvRow{line.line, split_fields(line.text)});
  }
  return rows;
}

}  // namespace bertlab::classifier
