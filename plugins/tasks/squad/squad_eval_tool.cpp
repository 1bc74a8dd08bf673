// `bertlab squad evaluate`: the official evaluate-v1.1.py / evaluate-v2.0.py command.

#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/log.h>
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include <bertlab/absl_flags.h>
#include <bertlab/io/python_json.h>
#include "squad_eval.h"
#include "squad_json.h"
#include "squad_tools.h"

namespace bertlab::squad {

namespace fs = std::filesystem;

namespace {

AnswerMap read_predictions(const fs::path& path) {
  const nlohmann::json j = read_json_file(path);
  BERTLAB_CHECK_AS(DataError, j.is_object(),
                   "{}: predictions must be a JSON object of question id → answer text (as "
                   "predictions.json), found {}",
                   path.string(), j.type_name());
  AnswerMap out;
  for (const auto& [id, text] : j.items()) {
    BERTLAB_CHECK_AS(DataError, text.is_string(),
                     "{}: the prediction of \"{}\" must be a string, found {} ({})", path.string(),
                     id, text.type_name(), text.dump().substr(0, 60));
    out.emplace(id, text.get<std::string>());
  }
  return out;
}

NullOddsMap read_null_odds(const fs::path& path) {
  const std::string text = read_json_text(path);
  parse_json(text, path);  // malformed JSON is reported with its line and column
  const auto j = nlohmann::ordered_json::parse(text);  // in file order, as Python's dict
  BERTLAB_CHECK_AS(DataError, j.is_object(),
                   "{}: null odds must be a JSON object of question id → number (as "
                   "null_odds.json), found {}",
                   path.string(), j.type_name());
  NullOddsMap out;
  for (const auto& [id, value] : j.items()) {
    BERTLAB_CHECK_AS(DataError, value.is_number(),
                     "{}: the null odds of \"{}\" must be a number, found {}", path.string(), id,
                     value.dump().substr(0, 60));
    out.emplace_back(id, value.get<double>());
  }
  return out;
}

}  // namespace

int evaluate_tool(const std::vector<std::string>& args) {
  FlagSet flags("bertlab squad evaluate");
  flags.add_string("data_file", "", "the SQuAD dataset (dev-v1.1.json, dev-v2.0.json, or .zip)");
  flags.add_string("pred_file", "", "predictions.json: question id → answer text");
  flags.add_string("na_prob_file", "", "v2: null_odds.json, for best_exact/best_f1");
  flags.add_float("na_prob_thresh", 1.0, "v2: predict no answer when the null odds exceed this");
  flags.add_string("out_file", "", "write the metrics (one JSON line) here instead of printing");
  // evaluate-v2.0.py's own spellings.
  flags.add_alias("-n", "na_prob_file");
  flags.add_alias("--na-prob-file", "na_prob_file");
  flags.add_alias("-t", "na_prob_thresh");
  flags.add_alias("--na-prob-thresh", "na_prob_thresh");
  flags.add_alias("-o", "out_file");
  flags.add_alias("--out-file", "out_file");
  const auto positional = flags.parse(args);
  if (flags.help_requested()) {
    std::fputs(flags.usage().c_str(), stdout);
    std::fputs(
        "  or, as the official scripts: DATA_FILE PRED_FILE [-n NA_PROB_FILE] [-t T] [-o OUT]\n",
        stdout);
    return 0;
  }
  std::string data_file = flags.get_string("data_file");
  std::string pred_file = flags.get_string("pred_file");
  if (positional.size() > 2 ||
      (!positional.empty() && (!data_file.empty() || !pred_file.empty()))) {
    throw ConfigError(
        "bertlab squad evaluate: give the files either as --data_file D --pred_file P or as "
        "D P, once");
  }
  if (positional.size() == 2) {
    data_file = positional[0];
    pred_file = positional[1];
  }
  if (data_file.empty() || pred_file.empty()) {
    throw ConfigError(
        "bertlab squad evaluate: pass the dataset and the predictions: --data_file DEV.json "
        "--pred_file PREDICTIONS.json (or DEV.json PREDICTIONS.json, as the official scripts)");
  }
  const nlohmann::json dataset = read_json_file(data_file);
  BERTLAB_CHECK_AS(DataError,
                   dataset.is_object() && dataset.contains("data") && dataset["data"].is_array(),
                   "{}: not a SQuAD dataset (no top-level \"data\" array of articles); pass "
                   "dev-v1.1.json or dev-v2.0.json as --data_file",
                   data_file);
  const AnswerMap predictions = read_predictions(pred_file);
  EvalResult result;
  const bool v2 = is_squad_v2(dataset);
  if (v2) {
    std::optional<NullOddsMap> odds;
    if (!flags.get_string("na_prob_file").empty()) {
      odds = read_null_odds(flags.get_string("na_prob_file"));
    }
    result = evaluate_v2(dataset["data"], predictions, odds, flags.get_float("na_prob_thresh"));
  } else {
    // evaluate-v1.1.py's check of the file's "version" (a warning only).
    const auto it = dataset.find("version");
    const std::string version = it == dataset.end() ? "(none)"
                                : it->is_string()   ? it->get<std::string>()
                                                    : it->dump();
    if (version != "1.1") {
      std::fprintf(stderr, "Evaluation expects v-1.1, but got dataset with v-%s\n",
                   version.c_str());
    }
    if (!flags.get_string("na_prob_file").empty()) {
      log_warning("eval", "squad evaluate: {} is SQuAD 1.1 data; --na_prob_file ignored",
                  data_file);
    }
    result = evaluate_v1(dataset["data"], predictions);
  }
  if (!flags.get_string("out_file").empty()) {
    write_file_atomic(flags.get_string("out_file"), python_json_dumps(result.metrics));
    return 0;
  }
  // The official scripts: v1.1 prints one line, v2.0 indents by 2.
  const std::string text = python_json_dumps(result.metrics, v2 ? 2 : -1) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace bertlab::squad
