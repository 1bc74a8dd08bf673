// SQuAD JSON reading and feature creation: the input is a dataset file; it is read for
// training with version_2_with_negative and for prediction, and every example read becomes
// features over short windows (so that many windows and max-context checks are exercised).

#include <bertlab/text/tokenizer.h>

#include <memory>

#include "fuzz_util.h"
#include "squad_data.h"
#include "squad_features.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bertlab;
  static const FullTokenizer tokenizer(fuzz::test_data("vocab/bert-base-uncased/vocab.txt"), true);
  static const bool quiet = (fuzz::quiet_logs(), true);
  (void)quiet;
  const auto path = fuzz::write_scratch("squad.json", data, size);
  for (const bool training : {true, false}) {
    fuzz::expect_only_bertlab_errors([&] {
      squad::ReadOptions read;
      read.is_training = training;
      read.version_2_with_negative = true;
      const auto examples = squad::read_squad_examples(path, read);
      squad::FeatureOptions features;
      features.max_seq_length = 32;
      features.doc_stride = 8;
      features.max_query_length = 8;
      features.is_training = training;
      for (const auto& f : squad::convert_examples_to_features(examples, tokenizer, features)) {
        (void)squad::feature_to_json_line(f, training);
      }
    });
  }
  return 0;
}
