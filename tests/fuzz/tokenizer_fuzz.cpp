// The tokenizer on arbitrary bytes: Google's BasicTokenizer + WordPiece over the bert-base
// uncased vocabulary, lower-cased or cased by the first byte. Invalid UTF-8 must be a DataError.

#include <bertlab/text/tokenizer.h>

#include <memory>
#include <string_view>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bertlab;
  static const auto vocab = std::make_shared<const Vocab>(
      Vocab::load(fuzz::test_data("vocab/bert-base-uncased/vocab.txt")));
  static const FullTokenizer uncased(vocab, true);
  static const FullTokenizer cased(vocab, false);
  if (size == 0) return 0;
  const FullTokenizer& tokenizer = (data[0] & 1) != 0 ? uncased : cased;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  fuzz::expect_only_bertlab_errors([&] {
    const auto ids = tokenizer.tokenize_to_ids(text);
    const auto pieces = tokenizer.tokenize(text);
    // The two paths must agree piece for piece.
    if (ids.size() != pieces.size() || tokenizer.convert_tokens_to_ids(pieces) != ids) {
      std::fprintf(stderr, "[fuzz] tokenize and tokenize_to_ids disagree\n");
      std::abort();
    }
  });
  return 0;
}
