// Experiment files: TOML parsing, variants, and validation of every key against the real
// plugins' declarations (loaded once from the build's plugin folder), as `bertlab validate`.

#include "config/experiment.h"
#include "fuzz_util.h"
#include "runtime/plugin_host.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bertlab;
  static PluginHost* host = [] {
    fuzz::quiet_logs();
    auto* h = new PluginHost();  // kept for the process: plugins stay loaded
    h->load_directories({BERTLAB_FUZZ_PLUGIN_DIR});
    return h;
  }();
  const auto path = fuzz::write_scratch("experiment.toml", data, size);
  fuzz::expect_only_bertlab_errors([&] {
    const ExperimentFile file = parse_experiment_file(path);
    (void)resolve_experiment(file, host->registry(), ResolveOptions{});
  });
  return 0;
}
