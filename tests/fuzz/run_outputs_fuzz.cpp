// Run outputs as `bertlab compare` and the report read them: the input is a variant's
// metrics.jsonl; its first byte picks whether the rest is also read as eval_results.json and
// run_summary.json. What parses is then plotted (SVG line plots and the eval bar chart), as
// the report does with any values a run may have written.

#include <filesystem>

#include "fuzz_util.h"
#include "report/report.h"
#include "report/run_outputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bertlab;
  namespace fs = std::filesystem;
  if (size == 0) return 0;
  fuzz::quiet_logs();
  const fs::path dir = fuzz::scratch_dir() / "run" / "variant";
  fs::create_directories(dir);
  (void)fuzz::write_scratch("run/variant/metrics.jsonl", data + 1, size - 1);
  std::error_code ignored;
  fs::remove(dir / "eval_results.json", ignored);
  fs::remove(dir / "run_summary.json", ignored);
  if (data[0] & 1) (void)fuzz::write_scratch("run/variant/eval_results.json", data + 1, size - 1);
  if (data[0] & 2) (void)fuzz::write_scratch("run/variant/run_summary.json", data + 1, size - 1);
  fuzz::expect_only_bertlab_errors([&] {
    std::vector<VariantOutputs> outputs = {read_variant_outputs(dir)};
    // The eval values as metrics too, so that the bar chart sees arbitrary numbers.
    if (outputs[0].eval.empty() && !outputs[0].metrics.empty()) {
      for (const auto& [name, value] : outputs[0].metrics.front().values) {
        outputs[0].eval.emplace_back(name, value);
      }
    }
    (void)report_plots({"variant"}, outputs);
  });
  return 0;
}
