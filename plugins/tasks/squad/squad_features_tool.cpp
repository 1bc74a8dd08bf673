// `bertlab squad features` and `bertlab bench squad-features`.

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include <bertlab/absl_flags.h>
#include "squad_data.h"
#include "squad_features.h"
#include "squad_tools.h"

namespace bertlab::squad {

namespace {

// The flags both commands share: oracle_squad_features.py's, i.e. run_squad.py's.
void add_feature_flags(FlagSet& flags) {
  flags.add_string("vocab_file", "", "vocab.txt of the BERT model (required)");
  flags.add_string("input", "", "SQuAD JSON file, plain or .json.zip (required)");
  flags.add_bool("training", false, "locate the answers and compute start/end positions");
  flags.add_bool("version_2_with_negative", false, "SQuAD 2.0: read is_impossible");
  flags.add_int("max_seq_length", 384, "tokens per feature, [CLS] and [SEP]s included");
  flags.add_int("doc_stride", 128, "tokens between the starts of consecutive windows");
  flags.add_int("max_query_length", 64, "question tokens kept");
  flags.add_bool("do_lower_case", true, "lower-case and strip accents (uncased models)");
}

struct FeatureRun {
  std::vector<SquadExample> examples;
  std::vector<SquadFeature> features;
  double read_seconds = 0.0;
  double feature_seconds = 0.0;  // tokenization included
};

// Parses the flags; false when --help was asked for (usage printed).
bool parse_feature_flags(FlagSet& flags, const std::vector<std::string>& args) {
  add_feature_flags(flags);
  const auto positional = flags.parse(args);
  if (flags.help_requested()) {
    std::fputs(flags.usage().c_str(), stdout);
    return false;
  }
  if (!positional.empty()) {
    throw ConfigError(
        fmt::format("bertlab squad: unexpected argument \"{}\"; pass the file as "
                    "--input FILE.json",
                    positional.front()));
  }
  for (const char* required : {"vocab_file", "input"}) {
    if (flags.get_string(required).empty()) {
      throw ConfigError(fmt::format("bertlab squad: --{} is required", required));
    }
  }
  const int64_t seq = flags.get_int("max_seq_length");
  const int64_t query = flags.get_int("max_query_length");
  if (seq <= query + 3 || flags.get_int("doc_stride") <= 0 || query <= 0) {
    throw ConfigError(fmt::format(
        "bertlab squad: --max_seq_length ({}) must exceed --max_query_length ({}) + 3, and "
        "--doc_stride ({}) and --max_query_length must be > 0",
        seq, query, flags.get_int("doc_stride")));
  }
  return true;
}

FeatureRun make_features(const FlagSet& flags, const FullTokenizer& tokenizer) {
  using Clock = std::chrono::steady_clock;
  FeatureRun run;
  const auto t0 = Clock::now();
  ReadOptions read;
  read.is_training = flags.get_bool("training");
  read.version_2_with_negative = flags.get_bool("version_2_with_negative");
  run.examples = read_squad_examples(flags.get_string("input"), read);
  const auto t1 = Clock::now();
  FeatureOptions options;
  options.max_seq_length = flags.get_int("max_seq_length");
  options.doc_stride = flags.get_int("doc_stride");
  options.max_query_length = flags.get_int("max_query_length");
  options.is_training = read.is_training;
  run.features = convert_examples_to_features(run.examples, tokenizer, options);
  const auto t2 = Clock::now();
  run.read_seconds = std::chrono::duration<double>(t1 - t0).count();
  run.feature_seconds = std::chrono::duration<double>(t2 - t1).count();
  return run;
}

}  // namespace

int features_tool(const std::vector<std::string>& args) {
  FlagSet flags("bertlab squad features");
  if (!parse_feature_flags(flags, args)) return 0;
  const FullTokenizer tokenizer(flags.get_string("vocab_file"), flags.get_bool("do_lower_case"));
  const FeatureRun run = make_features(flags, tokenizer);
  const bool training = flags.get_bool("training");
  std::string out;
  for (const auto& feature : run.features) {
    out += feature_to_json_line(feature, training);
    out += '\n';
    if (out.size() > (1U << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

int bench_features_tool(const std::vector<std::string>& args) {
  FlagSet flags("bertlab bench squad-features");
  flags.add_int("repeat", 3, "timed repetitions; the fastest is reported");
  if (!parse_feature_flags(flags, args)) return 0;
  const FullTokenizer tokenizer(flags.get_string("vocab_file"), flags.get_bool("do_lower_case"));
  FeatureRun best;
  const int64_t repeat = std::max<int64_t>(1, flags.get_int("repeat"));
  for (int64_t r = 0; r < repeat; ++r) {
    FeatureRun run = make_features(flags, tokenizer);
    if (r == 0 || run.feature_seconds < best.feature_seconds) best = std::move(run);
  }
  nlohmann::ordered_json line;
  line["bench"] = "squad-features";
  line["input"] = flags.get_string("input");
  line["max_seq_length"] = flags.get_int("max_seq_length");
  line["doc_stride"] = flags.get_int("doc_stride");
  line["examples"] = best.examples.size();
  line["features"] = best.features.size();
  line["read_s"] = best.read_seconds;
  line["features_s"] = best.feature_seconds;
  line["features_per_s"] = static_cast<double>(best.features.size()) / best.feature_seconds;
  line["threads"] = 1;
  std::puts(line.dump().c_str());
  return 0;
}

}  // namespace bertlab::squad
