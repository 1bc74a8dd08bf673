// Reads a finished variant's output files back; every malformed file is a DataError naming it.

#include "report/run_outputs.h"

#include <bertlab/error.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot read the file", path.string()));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What to do about a damaged output file.
constexpr const char* kRerun = "; rerun the variant, or leave its folder out of the comparison";

nlohmann::json parse_object(std::string_view text, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) throw DataError(fmt::format("{}: not valid JSON{}", where, kRerun));
  if (!j.is_object()) throw DataError(fmt::format("{}: not a JSON object{}", where, kRerun));
  return j;
}

double number_or(const nlohmann::json& j, const char* key, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  return it->get<double>();
}

std::string string_or(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::vector<MetricsLine> parse_metrics_jsonl(std::string_view text, const std::string& file) {
  std::vector<MetricsLine> out;
  size_t line_number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", file, line_number);
    const nlohmann::json j = parse_object(line, where);
    auto step = j.find("step");
    if (step == j.end() || !step->is_number_integer() || step->get<int64_t>() < 0) {
      throw DataError(fmt::format(
          "{}: no \"step\" (a non-negative integer); is this a bertlab metrics.jsonl?{}", where,
          kRerun));
    }
    MetricsLine m;
    m.step = step->get<int64_t>();
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "step") continue;
      if (it->is_number()) {
        m.values[it.key()] = it->get<double>();
      } else if (it->is_null()) {
        m.values[it.key()] = kNaN;
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

Metrics parse_eval_results(std::string_view text, const std::string& file) {
  // Member order as written (the task's metric order): an ordered_json keeps it.
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) throw DataError(fmt::format("{}: not valid JSON{}", file, kRerun));
  if (!j.is_object()) throw DataError(fmt::format("{}: not a JSON object{}", file, kRerun));
  Metrics out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "global_step") continue;
    if (it->is_number()) out.emplace_back(it.key(), it->get<double>());
  }
  return out;
}

std::string floor_json(const FloorMetrics& floor) {
  nlohmann::ordered_json j;
  j["name"] = floor.name;
  for (const auto& [name, value] : floor.metrics) j[name] = value;
  return j.dump(2) + "\n";
}

FloorMetrics parse_floor(std::string_view text, const std::string& file) {
  FloorMetrics floor{string_or(parse_object(text, file), "name"), parse_eval_results(text, file)};
  return floor;
}

std::string config_hash(const std::string& resolved_toml) {
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64's offset basis
  std::istringstream lines(resolved_toml);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind('#', 0) == 0 || line.rfind("resume = ", 0) == 0) continue;
    for (const char c : line + "\n") {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ULL;  // FNV-1a 64's prime
    }
  }
  return fmt::format("fnv1a64:{:016x}", hash);
}

std::string summary_json(const RunSummary& s) {
  nlohmann::ordered_json j;
  j["experiment"] = s.experiment;
  j["experiment_file"] = s.experiment_file;
  j["reference"] = s.reference;
  j["variant"] = s.variant;
  if (s.seed) j["seed"] = *s.seed;
  if (!s.config_hash.empty()) j["config_hash"] = s.config_hash;
  if (!s.init_checkpoint.empty()) j["init_checkpoint"] = s.init_checkpoint;
  if (!s.init_from.empty()) j["init_from"] = s.init_from;
  j["steps"] = s.steps;
  j["final_loss"] = s.final_loss;
  j["examples_per_second"] = s.examples_per_second;
  j["wall_time_s"] = s.wall_time_s;
  j["start_time"] = s.start_time;
  return j.dump(2) + "\n";
}

RunSummary parse_summary(std::string_view text, const std::string& file) {
  const nlohmann::json j = parse_object(text, file);
  RunSummary s;
  s.experiment = string_or(j, "experiment");
  s.experiment_file = string_or(j, "experiment_file");
  s.reference = string_or(j, "reference");
  s.variant = string_or(j, "variant");
  s.config_hash = string_or(j, "config_hash");
  s.init_checkpoint = string_or(j, "init_checkpoint");
  s.init_from = string_or(j, "init_from");
  if (auto seed = j.find("seed"); seed != j.end() && seed->is_number_integer()) {
    s.seed = seed->get<int64_t>();
  }
  auto steps = j.find("steps");
  s.steps = steps != j.end() && steps->is_number_integer() ? steps->get<int64_t>() : 0;
  s.final_loss = number_or(j, "final_loss", kNaN);
  s.examples_per_second = number_or(j, "examples_per_second", 0);
  s.wall_time_s = number_or(j, "wall_time_s", 0);
  s.start_time = number_or(j, "start_time", 0);
  return s;
}

bool is_variant_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "metrics.jsonl", ec);
}

VariantOutputs read_variant_outputs(const fs::path& dir) {
  VariantOutputs v;
  v.dir = dir;
  const fs::path metrics = dir / "metrics.jsonl";
  v.metrics = parse_metrics_jsonl(read_text(metrics), metrics.string());
  std::error_code ec;
  if (fs::is_regular_file(dir / "eval_results.json", ec)) {
    v.eval = parse_eval_results(read_text(dir / "eval_results.json"),
                                (dir / "eval_results.json").string());
  }
  if (fs::is_regular_file(dir / "floor.json", ec)) {
    v.floor = parse_floor(read_text(dir / "floor.json"), (dir / "floor.json").string());
  }
  if (fs::is_regular_file(dir / "run_summary.json", ec)) {
    v.summary =
        parse_summary(read_text(dir / "run_summary.json"), (dir / "run_summary.json").string());
    v.has_summary = true;
    return v;
  }
  // A run from before run_summary.json: what metrics.jsonl tells.
  const fs::path abs = fs::absolute(dir).lexically_normal();
  v.summary.variant = abs.filename().string();
  v.summary.experiment = abs.parent_path().filename().string();
  if (!v.metrics.empty()) {
    const MetricsLine& last = v.metrics.back();
    v.summary.steps = last.step;
    auto get = [&](const char* key) {
      auto it = last.values.find(key);
      return it == last.values.end() ? kNaN : it->second;
    };
    v.summary.final_loss = get("loss");
    v.summary.wall_time_s = get("elapsed_s");
    double sum = 0;
    int64_t n = 0;
    for (const auto& line : v.metrics) {
      auto it = line.values.find("examples_per_second");
      if (it != line.values.end() && std::isfinite(it->second)) {
        sum += it->second;
        ++n;
      }
    }
    v.summary.examples_per_second = n > 0 ? sum / static_cast<double>(n) : 0.0;
  }
  return v;
}

std::vector<fs::path> variant_dirs(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ConfigError(
        fmt::format("{}: no such folder; pass a run folder (runs/EXPERIMENT or "
                    "runs/EXPERIMENT/VARIANT) written by `bertlab run`",
                    dir.string()));
  }
  if (is_variant_dir(dir)) return {dir};
  // A variant run with several seeds keeps each run in VARIANT/seed-S/.
  auto seed_runs = [&ec](const fs::path& variant) {
    std::vector<fs::path> runs;
    for (const auto& entry : fs::directory_iterator(variant, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("seed-", 0) == 0 && entry.is_directory(ec) && is_variant_dir(entry.path())) {
        runs.push_back(entry.path());
      }
    }
    return runs;
  };
  std::vector<fs::path> out = seed_runs(dir);
  if (out.empty()) {
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (!entry.is_directory(ec)) continue;
      if (is_variant_dir(entry.path())) {
        out.push_back(entry.path());
      } else {
        const auto runs = seed_runs(entry.path());
        out.insert(out.end(), runs.begin(), runs.end());
      }
    }
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) {
    throw ConfigError(fmt::format(
        "{}: not a bertlab run: neither it nor any folder in it has a metrics.jsonl; pass "
        "runs/EXPERIMENT or runs/EXPERIMENT/VARIANT of a finished `bertlab run`",
        dir.string()));
  }
  return out;
}

void metric_series(const std::vector<MetricsLine>& lines, const std::string& key,
                   std::vector<double>* steps, std::vector<double>* values) {
  steps->clear();
  values->clear();
  for (const auto& line : lines) {
    auto it = line.values.find(key);
    steps->push_back(static_cast<double>(line.step));
    values->push_back(it == line.values.end() ? kNaN : it->second);
  }
}

}  // namespace bertlab
