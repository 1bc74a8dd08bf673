// `bertlab squad features` and `bertlab bench squad-features`.

#include <bertlab/error.h>
#include <bertlab/io/ordered_blocks.h>
#include <bertlab/io/python_json.h>
#include <bertlab/log.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
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

FeatureOptions feature_options(const FlagSet& flags, const ReadOptions& read) {
  FeatureOptions options;
  options.max_seq_length = flags.get_int("max_seq_length");
  options.doc_stride = flags.get_int("doc_stride");
  options.max_query_length = flags.get_int("max_query_length");
  options.is_training = read.is_training;
  return options;
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
  run.features =
      convert_examples_to_features(run.examples, tokenizer, feature_options(flags, read));
  const auto t2 = Clock::now();
  run.read_seconds = std::chrono::duration<double>(t1 - t0).count();
  run.feature_seconds = std::chrono::duration<double>(t2 - t1).count();
  return run;
}

/// Examples per block of the parallel conversion (about 50 features, 500 KB of JSON).
constexpr size_t kBlockExamples = 48;

/// Writes `bytes` to the file descriptor; throws Error naming what failed (a closed pipe, a full
/// disk).
void write_fd(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(
          fmt::format("bertlab squad features: writing the output failed ({}); is the "
                      "disk full or the pipe closed?",
                      std::strerror(errno)));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

/// A block of examples converted and encoded: its JSON lines, each written with unique_id 0 (the
/// ids depend on the features of the blocks before, known only when writing).
struct LineBlock {
  std::vector<SquadFeature> features;
  std::string lines;
  std::vector<size_t> line_starts;
  std::string out;
};

/// The features of every example as JSON Lines, written in order to `fd`: blocks of examples
/// converted and encoded on `threads` threads, nothing held beyond the blocks in flight. Returns
/// the number of features.
size_t write_feature_lines(const std::vector<SquadExample>& examples,
                           const FullTokenizer& tokenizer, const FeatureOptions& options,
                           int threads, int fd) {
  static constexpr std::string_view kIdPrefix = "{\"unique_id\": 0";
  const size_t blocks = (examples.size() + kBlockExamples - 1) / kBlockExamples;
  int64_t unique_id = kFirstUniqueId;
  encode_blocks_in_order<LineBlock>(
      blocks, threads,
      [&](size_t b, LineBlock& block) {
        block.features.clear();
        block.lines.clear();
        block.line_starts.clear();
        FeatureMaker maker(tokenizer, options);
        const size_t end = std::min(examples.size(), (b + 1) * kBlockExamples);
        for (size_t i = b * kBlockExamples; i < end; ++i) maker.add(examples, i, 0, block.features);
        for (auto& feature : block.features) {
          feature.unique_id = 0;  // the writer puts the real one in
          block.line_starts.push_back(block.lines.size());
          append_feature_json_line(block.lines, feature, options.is_training);
        }
        block.line_starts.push_back(block.lines.size());
      },
      [&](size_t, LineBlock& block) {
        block.out.clear();
        for (size_t k = 0; k + 1 < block.line_starts.size(); ++k) {
          const std::string_view line(block.lines.data() + block.line_starts[k],
                                      block.line_starts[k + 1] - block.line_starts[k]);
          block.out += "{\"unique_id\": ";
          append_json_int(block.out, unique_id++);
          block.out.append(line.substr(kIdPrefix.size()));
        }
        write_fd(fd, block.out);
      });
  return static_cast<size_t>(unique_id - kFirstUniqueId);
}

}  // namespace

int features_tool(const std::vector<std::string>& args) {
  FlagSet flags("bertlab squad features");
  flags.add_int("threads", 0,
                "threads to encode the JSON on; 0: one per core (the output is the same for any "
                "number)");
  if (!parse_feature_flags(flags, args)) return 0;
  const int64_t threads = flags.get_int("threads");
  if (threads < 0 || threads > 1024) {
    throw ConfigError(
        fmt::format("bertlab squad: --threads ({}) must be 0 (one per core) to 1024", threads));
  }
  const FullTokenizer tokenizer(flags.get_string("vocab_file"), flags.get_bool("do_lower_case"));
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  ReadOptions read;
  read.is_training = flags.get_bool("training");
  read.version_2_with_negative = flags.get_bool("version_2_with_negative");
  const auto examples = read_squad_examples(flags.get_string("input"), read);
  const auto t1 = Clock::now();
  const int encode_threads = threads == 0 ? default_encode_threads() : static_cast<int>(threads);
  const size_t features = write_feature_lines(examples, tokenizer, feature_options(flags, read),
                                              encode_threads, STDOUT_FILENO);
  const auto t2 = Clock::now();
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  log_info("data",
           "squad features: {} examples → {} features (read {:.2f} s, features and JSON "
           "{:.2f} s; {} threads)",
           examples.size(), features, seconds(t1 - t0), seconds(t2 - t1), encode_threads);
  return 0;
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
