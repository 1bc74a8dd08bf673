#pragma once
// Tab-separated files read the way Google's run_classifier.py reads them:
// csv.reader(delimiter="\t", quotechar=None) over a text file. No quote processing (a `"` is
// an ordinary character), records end at "\n", "\r\n" or a lone "\r", and an empty line is a
// row with no fields.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bertlab::classifier {

/// One record of a TSV file.
struct TsvRow {
  int64_t line = 0;                 ///< 1-based line number in the file
  std::vector<std::string> fields;  ///< empty for an empty line
};

/// Splits `text` into rows. A UTF-8 byte-order mark at the very start is dropped (see below).
///
/// Google's Python 3 reading decodes with "utf-8", not "utf-8-sig", so the BOM of the MRPC
/// files becomes part of the header's first field ("\ufeffQuality"). Every GLUE processor
/// skips that header or ignores that column, so dropping the BOM yields the same examples
/// and keeps it out of data columns in files without a header.
std::vector<TsvRow> parse_tsv(const std::string& text);

/// One line of a text file, without its terminator.
struct TextLine {
  int64_t line = 0;  ///< 1-based line number in the file
  std::string text;  ///< the line's bytes
};

/// Splits `text` into lines as parse_tsv does (same terminators, same BOM rule).
std::vector<TextLine> split_lines(const std::string& text);

/// Reads `path` and splits it into lines, with read_tsv's checks (readable file, UTF-8).
std::vector<TextLine> read_lines(const std::filesystem::path& path);

/// Reads and parses `path`. Throws DataError naming the path when it cannot be read, and
/// naming `path:line` when a line is not valid UTF-8 (Google decodes every field as UTF-8).
std::vector<TsvRow> read_tsv(const std::filesystem::path& path);

}  // namespace bertlab::classifier
