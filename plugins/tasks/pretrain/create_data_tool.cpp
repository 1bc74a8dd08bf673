// `bertlab pretrain create-data` and `bertlab bench create-data`.

#include <bertlab/absl_flags.h>
#include <bertlab/error.h>
#include <bertlab/log.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>
#include <glob.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "create_data.h"
#include "pretrain_tools.h"
#include "py_random.h"
#include "tf_example.h"

namespace bertlab::pretrain {

namespace fs = std::filesystem;

namespace {

void add_flags(FlagSet& f, bool output_required) {
  f.add_string("input_file", "",
               "input text, one sentence per line, blank line between documents; "
               "comma-separated, globs allowed (required)");
  f.add_string("output_file", "",
               std::string("comma-separated outputs, instances dealt round-robin: NAME.jsonl for "
                           "JSON Lines, any other name for TFRecord") +
                   (output_required ? " (required)" : " (optional)"));
  f.add_string("vocab_file", "", "vocab.txt of the BERT model (required)");
  f.add_bool("do_lower_case", true, "lower-case and strip accents (uncased models)");
  f.add_bool("do_whole_word_mask", false, "mask every piece of a word together");
  f.add_int("max_seq_length", 128, "tokens per instance");
  f.add_int("max_predictions_per_seq", 20, "most masked tokens per instance");
  f.add_int("random_seed", 12345, "seed of Python's random.Random");
  f.add_int("dupe_factor", 10, "passes over the input, each with other masks");
  f.add_float("masked_lm_prob", 0.15, "share of the tokens masked");
  f.add_float("short_seq_prob", 0.1, "share of instances with a shorter target length");
}

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// tf.gfile.Glob of each pattern, in order; a pattern without a match is an error (Google would
// silently read nothing).
std::vector<fs::path> input_files(const std::string& list) {
  std::vector<fs::path> files;
  for (const auto& pattern : split_commas(list)) {
    glob_t found{};
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &found);
    if (rc != 0) {
      ::globfree(&found);
      throw DataError(fmt::format("--input_file: no file matches \"{}\"", pattern));
    }
    for (size_t i = 0; i < found.gl_pathc; ++i) files.emplace_back(found.gl_pathv[i]);
    ::globfree(&found);
  }
  return files;
}

struct Parsed {
  CreateDataOptions options;
  std::vector<fs::path> inputs;
  std::vector<std::string> outputs;
  std::unique_ptr<FullTokenizer> tokenizer;
};

// Parses and checks the flags; nullopt when --help printed the usage.
std::optional<Parsed> parse(FlagSet& flags, const std::vector<std::string>& args,
                            bool output_required) {
  add_flags(flags, output_required);
  const auto positional = flags.parse(args);
  if (flags.help_requested()) {
    std::fputs(flags.usage().c_str(), stdout);
    return std::nullopt;
  }
  if (!positional.empty()) {
    throw ConfigError(
        fmt::format("unexpected argument \"{}\"; every setting is a --flag", positional.front()));
  }
  std::vector<const char*> required = {"input_file", "vocab_file"};
  if (output_required) required.push_back("output_file");
  for (const char* name : required) {
    if (flags.get_string(name).empty()) throw ConfigError(fmt::format("--{} is required", name));
  }
  Parsed p;
  p.options.max_seq_length = flags.get_int("max_seq_length");
  p.options.max_predictions_per_seq = flags.get_int("max_predictions_per_seq");
  p.options.random_seed = flags.get_int("random_seed");
  p.options.dupe_factor = flags.get_int("dupe_factor");
  p.options.masked_lm_prob = flags.get_float("masked_lm_prob");
  p.options.short_seq_prob = flags.get_float("short_seq_prob");
  p.options.do_whole_word_mask = flags.get_bool("do_whole_word_mask");
  p.options.validate();
  p.inputs = input_files(flags.get_string("input_file"));
  p.outputs = split_commas(flags.get_string("output_file"));
  p.tokenizer = std::make_unique<FullTokenizer>(flags.get_string("vocab_file"),
                                                flags.get_bool("do_lower_case"));
  return p;
}

bool is_jsonl(const std::string& name) {
  return name.size() >= 6 && name.compare(name.size() - 6, 6, ".jsonl") == 0;
}

// One output file: JSON Lines or TFRecord.
class InstanceSink {
 public:
  explicit InstanceSink(const std::string& name) {
    if (is_jsonl(name)) {
      jsonl_ = std::make_unique<AtomicFile>(name);
    } else {
      records_ = std::make_unique<TfRecordWriter>(name);
    }
  }
  void write(const InstanceFeatures& f) {
    if (jsonl_) {
      jsonl_->write(features_to_json_line(f) + "\n");
    } else {
      records_->write(serialize_example(to_example(f)));
    }
  }
  void close() {
    if (jsonl_) {
      jsonl_->commit();
    } else {
      records_->close();
    }
  }

 private:
  std::unique_ptr<AtomicFile> jsonl_;
  std::unique_ptr<TfRecordWriter> records_;
};

}  // namespace

int create_data_tool(const std::vector<std::string>& args) {
  FlagSet flags("bertlab pretrain create-data");
  auto parsed = parse(flags, args, true);
  if (!parsed) return 0;
  const auto documents = read_documents(parsed->inputs, *parsed->tokenizer);
  if (documents.empty()) {
    throw DataError(
        fmt::format("--input_file {}: no document with any token; the input needs "
                    "text, one sentence per line",
                    flags.get_string("input_file")));
  }
  PyRandom rng(static_cast<uint64_t>(parsed->options.random_seed));
  const auto instances =
      create_training_instances(documents, *parsed->tokenizer, parsed->options, rng);
  std::vector<std::unique_ptr<InstanceSink>> sinks;
  for (const auto& name : parsed->outputs) sinks.push_back(std::make_unique<InstanceSink>(name));
  // Round-robin over the outputs, as write_instance_to_example_files.
  for (size_t i = 0; i < instances.size(); ++i) {
    sinks[i % sinks.size()]->write(instance_features(instances[i], parsed->options.max_seq_length,
                                                     parsed->options.max_predictions_per_seq));
  }
  for (auto& sink : sinks) sink->close();
  log_info("data", "pretrain create-data: {} documents → {} instances in {}", documents.size(),
           instances.size(), flags.get_string("output_file"));
  return 0;
}

int bench_create_data_tool(const std::vector<std::string>& args) {
  FlagSet flags("bertlab bench create-data");
  flags.add_int("repeat", 3, "timed repetitions; the fastest is reported");
  auto parsed = parse(flags, args, false);
  if (!parsed) return 0;
  using Clock = std::chrono::steady_clock;
  double best_read = 0;
  double best_create = 0;
  size_t documents = 0;
  size_t instances = 0;
  const int64_t repeat = std::max<int64_t>(1, flags.get_int("repeat"));
  for (int64_t r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    auto docs = read_documents(parsed->inputs, *parsed->tokenizer);
    const auto t1 = Clock::now();
    documents = docs.size();
    PyRandom rng(static_cast<uint64_t>(parsed->options.random_seed));
    instances =
        create_training_instances(std::move(docs), *parsed->tokenizer, parsed->options, rng).size();
    const auto t2 = Clock::now();
    const double read_s = std::chrono::duration<double>(t1 - t0).count();
    const double create_s = std::chrono::duration<double>(t2 - t1).count();
    if (r == 0 || read_s + create_s < best_read + best_create) {
      best_read = read_s;
      best_create = create_s;
    }
  }
  nlohmann::ordered_json line;
  line["bench"] = "create-data";
  line["input_file"] = flags.get_string("input_file");
  line["dupe_factor"] = parsed->options.dupe_factor;
  line["documents"] = documents;
  line["instances"] = instances;
  line["read_tokenize_s"] = best_read;
  line["create_mask_s"] = best_create;
  line["instances_per_s"] = static_cast<double>(instances) / (best_read + best_create);
  line["threads"] = 1;
  std::puts(line.dump().c_str());
  return 0;
}

}  // namespace bertlab::pretrain
