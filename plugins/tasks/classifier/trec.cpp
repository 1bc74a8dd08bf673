// TREC question classification: see trec.h.

#include "trec.h"

#include <bertlab/error.h>
#include <bertlab/log.h>
#include <bertlab/text/tokenizer.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tsv_reader.h"

namespace bertlab::classifier {

namespace fs = std::filesystem;

namespace {

class TrecProcessor : public DataProcessor {
 public:
  explicit TrecProcessor(bool fine) : fine_(fine) {}
  std::string name() const override { return "trec"; }
  std::vector<InputExample> train_examples(const fs::path& dir) const override {
    return read(dir / "train_5500.label", "train");
  }
  std::vector<InputExample> dev_examples(const fs::path& dir) const override {
    return read(dir / "TREC_10.label", "test");
  }
  std::vector<std::string> labels() const override { return trec_labels(fine_); }
  MetricSet metric_set() const override { return MetricSet::kAccuracy; }

 private:
  std::vector<InputExample> read(const fs::path& file, const std::string& set) const;
  InputExample example(const fs::path& file, const std::string& set, int64_t line,
                       const std::string& text) const;

  bool fine_;
};

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw DataError(
        fmt::format("{}: cannot read (task_name \"trec\" reads train_5500.label and "
                    "TREC_10.label from data_dir)",
                    file.string()));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::vector<InputExample> TrecProcessor::read(const fs::path& file, const std::string& set) const {
  std::vector<InputExample> examples;
  int64_t first_bad = 0, bad_lines = 0;
  for (const TextLine& l : split_lines(read_bytes(file))) {
    size_t dropped = 0;
    const std::string text = drop_invalid_utf8(l.text, dropped);
    if (dropped > 0 && bad_lines++ == 0) first_bad = l.line;
    if (text.empty()) continue;  // a last empty line
    examples.push_back(example(file, set, l.line, text));
  }
  if (bad_lines > 0) {
    log_warning("data",
                "{}:{}: not valid UTF-8{}; the invalid bytes are dropped, as Google's tokenizer "
                "does (convert_to_unicode decodes with errors=\"ignore\")",
                file.string(), first_bad,
                bad_lines > 1 ? fmt::format(" (and {} more lines)", bad_lines - 1) : "");
  }
  return examples;
}

InputExample TrecProcessor::example(const fs::path& file, const std::string& set, int64_t line,
                                    const std::string& text) const {
  const size_t space = text.find(' ');
  const size_t colon = text.find(':');
  BERTLAB_CHECK_AS(DataError,
                   space != std::string::npos && colon != std::string::npos && colon < space,
                   "{}:{}: expected \"COARSE:fine question\", got \"{}\"", file.string(), line,
                   text.substr(0, 60));
  const std::string label = fine_ ? text.substr(0, space) : text.substr(0, colon);
  const auto& known = trec_labels(fine_);
  BERTLAB_CHECK_AS(DataError, std::find(known.begin(), known.end(), label) != known.end(),
                   "{}:{}: label \"{}\" is not one of TREC's {} {} labels", file.string(), line,
                   label, known.size(), fine_ ? "fine" : "coarse");
  InputExample e;
  e.guid = fmt::format("{}-{}", set, line - 1);
  e.text_a = text.substr(space + 1);
  e.label = label;
  return e;
}

}  // namespace

const std::vector<std::string>& trec_labels(bool fine) {
  static const std::vector<std::string> kCoarse = {"ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"};
  static const std::vector<std::string> kFine = {
      "ABBR:abb",      "ABBR:exp",      "ENTY:animal", "ENTY:body",      "ENTY:color",
      "ENTY:cremat",   "ENTY:currency", "ENTY:dismed", "ENTY:event",     "ENTY:food",
      "ENTY:instru",   "ENTY:lang",     "ENTY:letter", "ENTY:other",     "ENTY:plant",
      "ENTY:product",  "ENTY:religion", "ENTY:sport",  "ENTY:substance", "ENTY:symbol",
      "ENTY:techmeth", "ENTY:termeq",   "ENTY:veh",    "ENTY:word",      "DESC:def",
      "DESC:desc",     "DESC:manner",   "DESC:reason", "HUM:gr",         "HUM:ind",
      "HUM:title",     "HUM:desc",      "LOC:city",    "LOC:country",    "LOC:mount",
      "LOC:other",     "LOC:state",     "NUM:code",    "NUM:count",      "NUM:date",
      "NUM:dist",      "NUM:money",     "NUM:ord",     "NUM:other",      "NUM:period",
      "NUM:perc",      "NUM:speed",     "NUM:temp",    "NUM:volsize",    "NUM:weight"};
  return fine ? kFine : kCoarse;
}

std::unique_ptr<DataProcessor> make_trec_processor(bool fine) {
  return std::make_unique<TrecProcessor>(fine);
}

std::string drop_invalid_utf8(std::string text, size_t& dropped) {
  dropped = 0;
  // Each invalid byte is dropped alone: a continuation byte is never a valid start, so this
  // drops what Python's decoder drops as maximal invalid subparts.
  for (auto bad = find_invalid_utf8(text); bad; bad = find_invalid_utf8(text)) {
    text.erase(*bad, 1);
    ++dropped;
  }
  return text;
}

}  // namespace bertlab::classifier
