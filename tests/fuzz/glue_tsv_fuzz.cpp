// GLUE/XNLI TSV and generic tsv/jsonl reading: the input (after its first byte, kept for the
// inputs of the time when it picked one task) is every file of every task, read by each GLUE
// task's processor as Hugging Face's and Google's processors read them, and by the generic
// tsv (with and without a header) and jsonl readers.

#include <filesystem>
#include <fstream>

#include "fuzz_util.h"
#include "generic_processor.h"
#include "processors.h"
#include "tsv_reader.h"

namespace {

/// The generic readers' settings: columns that exist in short inputs, two labels.
bertlab::classifier::GenericFormatOptions generic_options(const std::string& format, bool header) {
  bertlab::classifier::GenericFormatOptions g;
  g.train_file = "train." + format;
  g.dev_file = "dev." + format;
  g.text_a_column = header ? "sentence" : "1";
  g.text_b_column = header ? "" : "2";
  g.label_column = header ? "label" : "0";
  g.label_list = {"0", "1"};
  g.header = header;
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bertlab;
  namespace fs = std::filesystem;
  if (size == 0) return 0;
  const fs::path dir = fuzz::scratch_dir() / "glue";
  fs::create_directories(dir / "multinli");
  // Each written by the harness (fs::copy_file's sendfile failed with EINTR under
  // libFuzzer's -timeout alarm; a harness failure is not a finding).
  for (const char* name :
       {"train.tsv", "dev.tsv", "dev_matched.tsv", "dev_mismatched.tsv", "xnli.dev.tsv",
        "multinli/multinli.train.zh.tsv", "train.jsonl", "dev.jsonl"}) {
    (void)fuzz::write_scratch(std::string("glue/") + name, data + 1, size - 1);
  }
  std::vector<std::unique_ptr<classifier::DataProcessor>> processors;
  for (const char* task :
       {"mrpc", "cola", "mnli", "xnli", "sst2", "stsb", "qqp", "qnli", "rte", "wnli"}) {
    processors.push_back(classifier::make_processor(task));
  }
  processors.push_back(
      std::make_unique<classifier::GenericProcessor>("tsv", generic_options("tsv", true)));
  processors.push_back(
      std::make_unique<classifier::GenericProcessor>("tsv", generic_options("tsv", false)));
  processors.push_back(
      std::make_unique<classifier::GenericProcessor>("jsonl", generic_options("jsonl", true)));
  for (const auto& processor : processors) {
    fuzz::expect_only_bertlab_errors([&] { (void)processor->train_examples(dir); });
    fuzz::expect_only_bertlab_errors([&] { (void)processor->eval_sets(dir); });
  }
  return 0;
}
