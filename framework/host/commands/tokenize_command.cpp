// `bertlab tokenize`: Google's FullTokenizer over each line of a stream.

#include "commands/tokenize_command.h"

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "commands/commands.h"

namespace bertlab {

namespace {

constexpr size_t kReadBytes = size_t{1} << 16;   // input chunk
constexpr size_t kFlushBytes = size_t{1} << 16;  // output is written in blocks of about this

// Buffers the output lines and writes them to the stream in large blocks.
class LineWriter {
 public:
  LineWriter(const FullTokenizer& tokenizer, bool ids, std::ostream& out)
      : tokenizer_(tokenizer), ids_(ids), out_(out) {
    buffer_.reserve(kFlushBytes * 2);
    visit_ = [this](std::string_view piece, int64_t id) { append(piece, id); };
  }

  void write_line(std::string_view line, int64_t line_number) {
    if (const auto bad = find_invalid_utf8(line)) {
      throw DataError(fmt::format("line {}, byte offset {}: invalid UTF-8", line_number, *bad));
    }
    line_number_ = line_number;
    first_ = true;
    tokenizer_.for_each_piece(line, visit_);
    buffer_.push_back('\n');
    if (buffer_.size() >= kFlushBytes) flush();
  }

  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
    if (!out_) throw Error("cannot write the tokenized output");
  }

 private:
  void append(std::string_view piece, int64_t id) {
    if (!first_) buffer_.push_back(' ');
    first_ = false;
    if (!ids_) {
      buffer_.append(piece);
      return;
    }
    if (id < 0) {
      // Google's convert_tokens_to_ids fails on it too (KeyError).
      throw DataError(
          fmt::format("line {}: an unknown word became '{}', which is not in the "
                      "vocabulary; add it to vocab.txt",
                      line_number_, piece));
    }
    fmt::format_to(std::back_inserter(buffer_), "{}", id);
  }

  const FullTokenizer& tokenizer_;
  const bool ids_;
  std::ostream& out_;
  std::string buffer_;
  std::function<void(std::string_view, int64_t)> visit_;
  int64_t line_number_ = 0;
  bool first_ = true;  // no piece written yet on the current line
};

}  // namespace

int run_tokenize_command(const FullTokenizer& tokenizer, bool ids, std::istream& in,
                         std::ostream& out) {
  LineWriter writer(tokenizer, ids, out);
  std::vector<char> chunk(kReadBytes);
  std::string pending;  // start of a line split across chunks
  int64_t line_number = 0;
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(in.gcount());
    const std::string_view data(chunk.data(), got);
    size_t start = 0;
    for (size_t newline; (newline = data.find('\n', start)) != std::string_view::npos;
         start = newline + 1) {
      const auto piece = data.substr(start, newline - start);
      if (pending.empty()) {
        writer.write_line(piece, ++line_number);
      } else {
        pending.append(piece);
        writer.write_line(pending, ++line_number);
        pending.clear();
      }
    }
    pending.append(data.substr(start));
  }
  if (in.bad()) throw Error(fmt::format("cannot read line {} of the input", line_number + 1));
  if (!pending.empty()) writer.write_line(pending, ++line_number);
  writer.flush();
  out.flush();
  return 0;
}

namespace {

struct TokenizeArgs {
  std::string vocab;           ///< --vocab
  bool no_lower_case = false;  ///< --no-lower-case
  bool ids = false;            ///< --ids
};

int tokenize(const TokenizeArgs& args) {
  FullTokenizer tokenizer(args.vocab, !args.no_lower_case);
  try {
    return run_tokenize_command(tokenizer, args.ids, std::cin, std::cout);
  } catch (const DataError& e) {
    throw DataError(fmt::format("stdin: {}", e.what()));
  }
}

}  // namespace

Command define_tokenize_command(CommandLine& parent, PluginOptions& /*plugins*/) {
  auto args = std::make_shared<TokenizeArgs>();
  CommandLine command = parent.subcommand("tokenize", "tokenize stdin lines as Google BERT does");
  command.required_option("--vocab", args->vocab, "vocab.txt");
  command.flag("--no-lower-case", args->no_lower_case, "keep case and accents");
  command.flag("--ids", args->ids, "print token ids instead of tokens");
  return {command, [args] { return tokenize(*args); }};
}

}  // namespace bertlab
