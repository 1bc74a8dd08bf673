#pragma once
// Reading what a finished run left in runs/<experiment>/<variant>/: metrics.jsonl,
// eval_results.json, floor.json and run_summary.json, for the report, `bertlab compare` and
// TensorBoard.

#include <bertlab/task.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bertlab {

/// One line of metrics.jsonl: its step and every numeric field (null, as the runner writes a
/// non-finite value, reads as NaN; non-numeric fields are left out).
struct MetricsLine {
  int64_t step = 0;
  std::map<std::string, double> values;
};

/// Parses metrics.jsonl text. Throws DataError naming `file`, the line and the problem for a
/// line that is not a JSON object or has no non-negative integer "step".
std::vector<MetricsLine> parse_metrics_jsonl(std::string_view text, const std::string& file);

/// Parses eval_results.json text: every numeric member but global_step, in file order. Throws
/// DataError naming `file` when it is not a JSON object.
Metrics parse_eval_results(std::string_view text, const std::string& file);

/// floor.json: a task's FloorMetrics, {"name": ..., then each metric}.
std::string floor_json(const FloorMetrics& floor);
/// Parses floor.json text (every numeric member a metric, in file order); throws DataError
/// naming `file`.
FloorMetrics parse_floor(std::string_view text, const std::string& file);

/// run_summary.json: what the runner knew at the end of a variant.
struct RunSummary {
  std::string experiment;       ///< [experiment] name
  std::string experiment_file;  ///< the TOML file
  std::string reference;        ///< [compare] reference
  std::string variant;          ///< variant name
  std::optional<int64_t> seed;  ///< with several seeds: this run's ("seed" in the file)
  /// config_hash() of the resolved configuration that ran; a later `bertlab run` of the same
  /// configuration skips the run ("" in files of older versions: never skipped).
  std::string config_hash;
  /// The checkpoint its weights were initialized from at step 0 ("": random initialization).
  std::string init_checkpoint;
  std::string
      init_from;  ///< the variant's run it started from ([model] init_from), "variant [seed S]"
  int64_t steps = 0;
  double final_loss = 0.0;
  double examples_per_second = 0.0;  ///< over the whole training
  double wall_time_s = 0.0;
  double start_time = 0.0;  ///< seconds since the Unix epoch when the variant started
};

/// A stable digest of a variant's resolved.toml, for run_summary.json: FNV-1a 64 over the text
/// without its comment lines and its `resume` key (resuming does not change what the run is).
std::string config_hash(const std::string& resolved_toml);

/// run_summary.json contents.
std::string summary_json(const RunSummary& summary);
/// Parses run_summary.json text; throws DataError naming `file`.
RunSummary parse_summary(std::string_view text, const std::string& file);

/// Everything read back from one variant's folder.
struct VariantOutputs {
  std::filesystem::path dir;
  RunSummary summary;  ///< from run_summary.json, else derived from metrics.jsonl
  bool has_summary = false;
  std::vector<MetricsLine> metrics;
  Metrics eval;        ///< empty without eval_results.json
  FloorMetrics floor;  ///< empty without floor.json
};

/// True when `dir` holds a variant's metrics.jsonl.
bool is_variant_dir(const std::filesystem::path& dir);

/// Reads a variant folder. Throws DataError naming the file for unreadable or malformed files.
VariantOutputs read_variant_outputs(const std::filesystem::path& dir);

/// The variant folders of a run folder: `dir` itself when it is one, else its subfolders that
/// are (sorted by name). Throws ConfigError when there are none ("not a run").
std::vector<std::filesystem::path> variant_dirs(const std::filesystem::path& dir);

/// A series of one metrics.jsonl field against step (NaN where a line lacks it).
void metric_series(const std::vector<MetricsLine>& lines, const std::string& key,
                   std::vector<double>* steps, std::vector<double>* values);

}  // namespace bertlab
