// GLUE/XNLI TSV reading: the input is the train and dev file of the task its first byte picks
// (mrpc, cola, mnli, xnli), read by that task's processor as run_classifier.py reads them.

#include <filesystem>
#include <fstream>

#include "fuzz_util.h"
#include "processors.h"
#include "tsv_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bertlab;
  namespace fs = std::filesystem;
  if (size == 0) return 0;
  static const auto tasks = classifier::supported_task_names();
  const std::string& task = tasks[data[0] % tasks.size()];
  const auto processor = classifier::make_processor(task);
  const fs::path dir = fuzz::scratch_dir() / "glue";
  fs::create_directories(dir / "multinli");
  // Each written by the harness (fs::copy_file's sendfile failed with EINTR under
  // libFuzzer's -timeout alarm; a harness failure is not a finding).
  for (const char* name : {"train.tsv", "dev.tsv", "dev_matched.tsv", "xnli.dev.tsv",
                           "multinli/multinli.train.zh.tsv"}) {
    (void)fuzz::write_scratch(std::string("glue/") + name, data + 1, size - 1);
  }
  fuzz::expect_only_bertlab_errors([&] { (void)processor->train_examples(dir); });
  fuzz::expect_only_bertlab_errors([&] { (void)processor->dev_examples(dir); });
  return 0;
}
