#pragma once
// `bertlab compare RUN_DIR...`: the comparison and report of finished runs, rebuilt from their
// files without training again (also across experiment files).

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "report/comparison.h"
#include "report/run_outputs.h"

namespace bertlab {

struct CompareOptions {
  std::vector<std::filesystem::path> runs;  ///< runs/EXPERIMENT or runs/EXPERIMENT/VARIANT
  /// Where comparison.md/.csv, plots/ and report.html go; default: the one experiment folder
  /// the variants share (required when they come from several).
  std::optional<std::filesystem::path> output;
  /// Reference variant (its label); default: the experiments' [compare] reference when it is
  /// among them, else the first variant.
  std::string reference;
};

/// What a finished run's folder holds, as the comparison takes it (final weights included, but
/// for a run of several seeds, whose comparison has no parameter difference), named `label`.
VariantResult result_from_outputs(const VariantOutputs& outputs, const std::string& label);

/// Reads every variant, writes the comparison files, prints the table to `out`. Throws
/// ConfigError for a folder that is not a run, DataError for a malformed output file.
int compare_runs(const CompareOptions& options, std::ostream& out);

}  // namespace bertlab
