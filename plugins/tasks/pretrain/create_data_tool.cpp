// `bertlab pretrain create-data` and `bertlab bench create-data`.

#include <bertlab/absl_flags.h>
#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/io/ordered_blocks.h>
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
  f.add_bool("next_sentence", true,
             "sentence pairs with next-sentence labels, as Google; false: masked-LM-only "
             "instances, one segment packed from a document's consecutive sentences (label 0)");
  f.add_int("max_seq_length", 128, "tokens per instance");
  f.add_int("max_predictions_per_seq", 20, "most masked tokens per instance");
  f.add_int("random_seed", 12345, "seed of Python's random.Random");
  f.add_int("dupe_factor", 10, "passes over the input, each with other masks");
  f.add_float("masked_lm_prob", 0.15, "share of the tokens masked");
  f.add_float("short_seq_prob", 0.1, "share of instances with a shorter target length");
  if (output_required) {  // the command; the benchmark times one thread
    f.add_int("threads", 0,
              "threads to tokenize and encode on; 0: one per core (the output is the same for "
              "any number)");
  }
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
  int threads = 1;
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
  p.options.next_sentence = flags.get_bool("next_sentence");
  p.options.validate();
  if (output_required) {
    const int64_t threads = flags.get_int("threads");
    if (threads < 0 || threads > 1024) {
      throw ConfigError(fmt::format("--threads ({}) must be 0 (one per core) to 1024", threads));
    }
    p.threads = threads == 0 ? default_encode_threads() : static_cast<int>(threads);
  }
  p.inputs = input_files(flags.get_string("input_file"));
  p.outputs = split_commas(flags.get_string("output_file"));
  p.tokenizer = std::make_unique<FullTokenizer>(flags.get_string("vocab_file"),
                                                flags.get_bool("do_lower_case"));
  return p;
}

bool is_jsonl(const std::string& name) {
  return name.size() >= 6 && name.compare(name.size() - 6, 6, ".jsonl") == 0;
}

/// Instances per block of the parallel encoding (about 50 KB of TFRecord, 130 KB of JSON).
constexpr size_t kBlockInstances = 64;

/// Writes the store's instances in its order, dealt round-robin over `outputs` (as
/// write_instance_to_example_files), each as JSON Lines or TFRecord by its name; encoded on
/// `threads` threads, written in order.
void write_instances(const InstanceStore& store, const std::vector<std::string>& outputs,
                     const CreateDataOptions& options, int threads) {
  std::vector<std::unique_ptr<AtomicFile>> files;
  std::vector<char> jsonl;
  for (const auto& name : outputs) {
    files.push_back(std::make_unique<AtomicFile>(name));
    jsonl.push_back(is_jsonl(name) ? 1 : 0);
  }
  // A block's bytes for each output.
  using Block = std::vector<std::string>;
  const auto& order = store.order();
  const size_t blocks = (order.size() + kBlockInstances - 1) / kBlockInstances;
  encode_blocks_in_order<Block>(
      blocks, threads,
      [&](size_t b, Block& block) {
        block.resize(files.size());
        for (auto& bytes : block) bytes.clear();
        const size_t end = std::min(order.size(), (b + 1) * kBlockInstances);
        for (size_t i = b * kBlockInstances; i < end; ++i) {
          const size_t k = i % files.size();
          const InstanceView instance = store[order[i]];
          if (jsonl[k] != 0) {
            append_instance_json_line(block[k], instance, options.max_seq_length,
                                      options.max_predictions_per_seq);
          } else {
            append_instance_record(block[k], instance, options.max_seq_length,
                                   options.max_predictions_per_seq);
          }
        }
      },
      [&](size_t, Block& block) {
        for (size_t k = 0; k < files.size(); ++k) files[k]->write(block[k]);
      });
  for (auto& file : files) file->commit();
}

}  // namespace

int create_data_tool(const std::vector<std::string>& args) {
  FlagSet flags("bertlab pretrain create-data");
  auto parsed = parse(flags, args, true);
  if (!parsed) return 0;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto documents = read_documents(parsed->inputs, *parsed->tokenizer, parsed->threads);
  if (documents.empty()) {
    throw DataError(
        fmt::format("--input_file {}: no document with any token; the input needs "
                    "text, one sentence per line",
                    flags.get_string("input_file")));
  }
  const size_t document_count = documents.size();
  const auto t1 = Clock::now();
  PyRandom rng(static_cast<uint64_t>(parsed->options.random_seed));
  const InstanceStore store =
      create_instances(std::move(documents), *parsed->tokenizer, parsed->options, rng);
  const auto t2 = Clock::now();
  write_instances(store, parsed->outputs, parsed->options, parsed->threads);
  const auto t3 = Clock::now();
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  log_info("data",
           "pretrain create-data: {} documents → {} {}instances in {} (read and tokenize {:.2f} "
           "s, create {:.2f} s holding {:.0f} MB, write {:.2f} s; {} threads)",
           document_count, store.size(), parsed->options.next_sentence ? "" : "masked-LM-only ",
           flags.get_string("output_file"), seconds(t1 - t0), seconds(t2 - t1),
           static_cast<double>(store.bytes()) / 1e6, seconds(t3 - t2), parsed->threads);
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
  InstanceStore store;
  const int64_t repeat = std::max<int64_t>(1, flags.get_int("repeat"));
  for (int64_t r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    auto docs = read_documents(parsed->inputs, *parsed->tokenizer);
    const auto t1 = Clock::now();
    documents = docs.size();
    PyRandom rng(static_cast<uint64_t>(parsed->options.random_seed));
    store = create_instances(std::move(docs), *parsed->tokenizer, parsed->options, rng);
    const auto t2 = Clock::now();
    const double read_s = std::chrono::duration<double>(t1 - t0).count();
    const double create_s = std::chrono::duration<double>(t2 - t1).count();
    if (r == 0 || read_s + create_s < best_read + best_create) {
      best_read = read_s;
      best_create = create_s;
    }
  }
  // The writers' encoding on one thread: every instance in the written order into a buffer
  // handed on (here: cleared) every MiB, as the files' buffers are.
  const auto encode_rate = [&](bool jsonl) {
    double best = 0;
    for (int64_t r = 0; r < repeat; ++r) {
      std::string buffer;
      size_t bytes = 0;
      const auto t0 = Clock::now();
      for (const uint32_t i : store.order()) {
        if (jsonl) {
          append_instance_json_line(buffer, store[i], parsed->options.max_seq_length,
                                    parsed->options.max_predictions_per_seq);
        } else {
          append_instance_record(buffer, store[i], parsed->options.max_seq_length,
                                 parsed->options.max_predictions_per_seq);
        }
        if (buffer.size() >= (size_t{1} << 20)) {
          bytes += buffer.size();
          buffer.clear();
        }
      }
      bytes += buffer.size();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      best = std::max(best, static_cast<double>(bytes) / s / 1e6);
    }
    return best;
  };
  nlohmann::ordered_json line;
  line["bench"] = "create-data";
  line["input_file"] = flags.get_string("input_file");
  line["dupe_factor"] = parsed->options.dupe_factor;
  line["next_sentence"] = parsed->options.next_sentence;
  line["documents"] = documents;
  line["instances"] = store.size();
  line["read_tokenize_s"] = best_read;
  line["create_mask_s"] = best_create;
  line["instances_per_s"] = static_cast<double>(store.size()) / (best_read + best_create);
  line["store_mb"] = static_cast<double>(store.bytes()) / 1e6;
  line["tfrecord_encode_mb_per_s"] = encode_rate(false);
  line["jsonl_encode_mb_per_s"] = encode_rate(true);
  line["threads"] = 1;
  std::puts(line.dump().c_str());
  return 0;
}

}  // namespace bertlab::pretrain
