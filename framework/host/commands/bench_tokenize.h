#pragma once
// `bertlab bench tokenize`: Google's FullTokenizer's throughput on a text file.

#include <string>

namespace bertlab {

struct TokenizeBenchOptions {
  std::string vocab_file;
  std::string input;  ///< a text file, tokenized line by line
  bool do_lower_case = true;
  int threads = 0;  ///< the parallel run's threads; 0: one per core
  int repeats = 3;  ///< best of
};

/// Prints one JSON line: MB/s and tokens/s of FullTokenizer on one thread and on `threads`
/// threads (lines split among them), best of `repeats`.
int bench_tokenize(const TokenizeBenchOptions& options);

}  // namespace bertlab
