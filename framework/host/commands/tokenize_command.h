#pragma once
// The logic of `bertlab tokenize`: Google's FullTokenizer over each line of a stream.

#include <iosfwd>

namespace bertlab {

class FullTokenizer;

/// Writes one output line per input line of `in`: its word pieces joined by single spaces, or
/// their decimal ids with `ids`. A line is the text before its '\n' ('\r' is kept, and Google's
/// cleaning then treats it as whitespace); an unterminated last line counts too. Throws
/// DataError "line N, byte offset M: invalid UTF-8" (N from 1, M from 0 within the line) for
/// input that is not UTF-8; the caller prefixes the stream's name. Returns the exit code, 0.
int run_tokenize_command(const FullTokenizer& tokenizer, bool ids, std::istream& in,
                         std::ostream& out);

}  // namespace bertlab
