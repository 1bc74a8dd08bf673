// Studies in stages: `[model] init_from = "VARIANT"`. The configuration (order, links, every
// error), then the real executable: one after another and with --jobs, the runs that start from
// a variant wait for it, load its final weights and say so; finished stages are not rerun; a
// failed stage skips the runs that start from it; stale or missing weights are refused.

#include <bertlab/error.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/experiment.h"
#include "report/comparison.h"
#include "report/run_outputs.h"
#include "runtime/plugin_host.h"
#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;
using testing::write_file;

/// A two-stage study of the tiny classifier on 32 MRPC examples: `finetuned` (written first)
/// starts from `pretrained`; `body` is appended to `pretrained`; `seeds` lists the seeds.
std::string study(const std::string& body, const std::string& seeds = "[1, 2]") {
  return testing::tiny_classifier_toml(
             fmt::format("name = \"stages\"\nseeds = {}\nthreads = 1\n", seeds), "1e-3") +
         fmt::format(R"(
[train]
train_batch_size = 8
num_train_steps = 4
log_every_steps = 2

[[variant]]
name = "finetuned"
model.init_from = "pretrained"
optimizer.learning_rate = 5e-4

[[variant]]
name = "pretrained"
{}
)",
                     body);
}

ResolvedExperiment resolve(const fs::path& path, const ResolveOptions& options = {}) {
  return resolve_experiment(parse_experiment_file(path), testing::builtin_plugins().registry(),
                            options);
}

std::string errors_of(const fs::path& path) {
  try {
    resolve(path);
  } catch (const ConfigError& e) {
    std::string out;
    for (const auto& line : e.messages()) out += line + "\n";
    return out;
  }
  return "";
}

TEST(StagesConfig, RunsComeAfterTheVariantTheyStartFromAndLoadItsSameSeedsWeights) {
  TempDir dir;
  const fs::path path = dir / "stages.toml";
  write_file(path, study("\n[[variant]]\nname = \"twice\"\nmodel.init_from = \"finetuned\"\n"));
  ResolveOptions options;
  options.output_dir = dir / "runs";
  const ResolvedExperiment e = resolve(path, options);
  ASSERT_EQ(e.variants.size(), 6u);
  const std::vector<std::pair<std::string, int64_t>> order = {{"pretrained", 1}, {"pretrained", 2},
                                                              {"finetuned", 1},  {"finetuned", 2},
                                                              {"twice", 1},      {"twice", 2}};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(e.variants[i].name, order[i].first) << i;
    EXPECT_EQ(e.variants[i].repeat_seed, order[i].second) << i;
    EXPECT_EQ(e.variants[i].stage, static_cast<int>(i / 2)) << i;
  }
  const ResolvedVariant& ft2 = e.variants[3];
  ASSERT_TRUE(ft2.init_from.has_value());
  EXPECT_EQ(ft2.init_from->label(), "pretrained seed 2");
  const fs::path weights = dir / "runs" / "stages" / "pretrained" / "seed-2" / "model.safetensors";
  EXPECT_EQ(ft2.init_from->checkpoint, weights);
  EXPECT_EQ(ft2.model.get_path("init_checkpoint"), weights);
  EXPECT_EQ(ft2.model.get_string("init_from"), "");
  EXPECT_EQ(ft2.init_from->config_hash, run_config_hash(e.variants[1]));
  EXPECT_NE(ft2.resolved_toml.find(fmt::format("init_checkpoint = \"{}\"", weights.string())),
            std::string::npos)
      << ft2.resolved_toml;
  EXPECT_NE(ft2.resolved_toml.find("# [model] init_from = \"pretrained\": it starts from the "
                                   "final weights of run pretrained seed 2"),
            std::string::npos)
      << ft2.resolved_toml;
  // The hash of a run that starts from another holds that run's: a changed first stage changes it.
  EXPECT_NE(run_config_hash(ft2), config_hash(ft2.resolved_toml));
  EXPECT_EQ(e.variants[5].init_from->config_hash, run_config_hash(ft2));
  // Selected alone, a later stage still links to the runs it starts from, which do not run.
  options.selected_variants = {"twice"};
  const ResolvedExperiment alone = resolve(path, options);
  ASSERT_EQ(alone.variants.size(), 2u);
  EXPECT_EQ(alone.dependencies.size(), 4u);
  EXPECT_EQ(alone.variants[1].init_from->config_hash, run_config_hash(ft2));
}

// A first stage run once (its own repeats = 1) serves every seed of the second.
TEST(StagesConfig, EverySeedStartsFromAVariantsOnlyRun) {
  TempDir dir;
  const fs::path path = dir / "stages.toml";
  std::string text = study("experiment.repeats = 1");
  text.replace(text.find("seeds = [1, 2]"), 14, "seed = 4\nrepeats = 3");
  write_file(path, text);
  ResolveOptions options;
  options.output_dir = dir / "runs";
  const ResolvedExperiment e = resolve(path, options);
  EXPECT_EQ(e.seeds, (std::vector<int64_t>{4, 5, 6}));
  ASSERT_EQ(e.variants.size(), 4u);
  EXPECT_EQ(e.variants[0].name, "pretrained");
  EXPECT_FALSE(e.variants[0].repeat_seed.has_value());
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(e.variants[i].repeat_seed, static_cast<int64_t>(3 + i));
    EXPECT_EQ(e.variants[i].init_from->label(), "pretrained");
    EXPECT_EQ(e.variants[i].init_from->checkpoint,
              dir / "runs" / "stages" / "pretrained" / "model.safetensors");
  }
}

TEST(StagesConfig, UnknownSelfCyclicAndDoubleStartsAreConfigurationErrors) {
  TempDir dir;
  const fs::path path = dir / "stages.toml";
  // A typo: the closest name is suggested, with the file and line.
  std::string text = study("");
  text.replace(text.find("init_from = \"pretrained\""), 24, "init_from = \"pretrianed\"");
  write_file(path, text);
  std::string errors = errors_of(path);
  EXPECT_NE(errors.find(path.string() + ":30:7: model.init_from: variant 'finetuned' starts from "
                                        "'pretrianed', and there is no such variant"),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("did you mean 'pretrained'?"), std::string::npos) << errors;
  // Itself.
  write_file(path, study("model.init_from = \"pretrained\""));
  errors = errors_of(path);
  EXPECT_NE(errors.find("variant 'pretrained' starts from itself"), std::string::npos) << errors;
  // A cycle of two.
  write_file(path, study("model.init_from = \"finetuned\""));
  errors = errors_of(path);
  EXPECT_NE(errors.find("the variants start from each other in a cycle, finetuned -> pretrained "
                        "-> finetuned"),
            std::string::npos)
      << errors;
  // Both init_from and init_checkpoint.
  text = study("");
  text.replace(text.find("model.init_from"), 0,
               fmt::format("model.init_checkpoint = \"{}\"\n",
                           data_path("checkpoints/tiny-pytorch/pytorch_model.bin").string()));
  write_file(path, text);
  errors = errors_of(path);
  EXPECT_NE(errors.find("sets both init_from = 'pretrained' and init_checkpoint"),
            std::string::npos)
      << errors;
}

nlohmann::json summary_of(const fs::path& run) {
  return nlohmann::json::parse(read_file(run / "run_summary.json"));
}

TEST(StagesRun, JobsWaitForTheirStageLoadItsWeightsAndFinishedStagesAreNotRerun) {
  TempDir dir;
  const fs::path path = dir / "stages.toml";
  write_file(path, study(""));
  const fs::path runs = dir / "runs" / "stages";
  auto r =
      run_bertlab({"run", path.string(), "--output-dir", (dir / "runs").string(), "--jobs", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("4/4 runs done"), std::string::npos) << r.err;
  for (const int seed : {1, 2}) {
    const fs::path run = runs / "finetuned" / fmt::format("seed-{}", seed);
    const fs::path weights =
        runs / "pretrained" / fmt::format("seed-{}", seed) / "model.safetensors";
    const nlohmann::json summary = summary_of(run);
    EXPECT_EQ(summary.value("init_from", ""), fmt::format("pretrained seed {}", seed));
    EXPECT_EQ(summary.value("init_checkpoint", ""), weights.string());
    // Every parameter of the classifier came from the first stage's run of the same seed.
    const nlohmann::json report = nlohmann::json::parse(read_file(run / "init_report.json"));
    EXPECT_EQ(report.value("init_checkpoint", ""), weights.string());
    EXPECT_TRUE(report["missing"].empty()) << report.dump();
    EXPECT_FALSE(report["loaded"].empty()) << report.dump();
    // Its log says so (a run of --jobs: its output, prefixed with its name).
    EXPECT_NE(r.out.find(fmt::format("[finetuned seed {}] [model] variant 'finetuned': "
                                     "init_checkpoint {} (safetensors)",
                                     seed, weights.string())),
              std::string::npos)
        << r.out;
  }
  // The first stage ran before the second: its summary was written first.
  EXPECT_LT(summary_of(runs / "pretrained" / "seed-1").value("start_time", 0.0),
            summary_of(runs / "finetuned" / "seed-1").value("start_time", 0.0));
  // Again: nothing runs. One after another: skipped too.
  auto again =
      run_bertlab({"run", path.string(), "--output-dir", (dir / "runs").string(), "--jobs", "2"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("0 run(s) to do"), std::string::npos) << again.err;
  // The first stage's configuration changed in the file: alone, the second stage refuses the
  // weights made by the old one; the whole study reruns both stages, the second because the
  // weights it starts from changed although its own configuration did not.
  write_file(path, study("train.num_train_steps = 3"));
  auto stale = run_bertlab({"run", path.string(), "--output-dir", (dir / "runs").string(),
                            "--variant", "finetuned", "--run-seed", "1"});
  EXPECT_NE(stale.exit_code, 0);
  EXPECT_NE(stale.err.find("was made by another configuration of it"), std::string::npos)
      << stale.err;
  auto both = run_bertlab({"run", path.string(), "--output-dir", (dir / "runs").string()});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  for (const char* run : {"'pretrained' (seed 1): task", "'pretrained' (seed 2): task",
                          "'finetuned' (seed 1): task", "'finetuned' (seed 2): task"}) {
    EXPECT_NE(both.err.find(std::string("variant ") + run), std::string::npos) << run << both.err;
  }
}

TEST(StagesRun, AFailedStageSkipsTheRunsThatStartFromItAndMissingWeightsAreNamed) {
  TempDir dir;
  // The first stage's data is broken (a line without its columns): it fails when it reads it.
  fs::create_directories(dir / "broken");
  fs::copy_file(data_path("experiments/mrpc32/dev.tsv"), dir / "broken" / "dev.tsv");
  write_file(dir / "broken" / "train.tsv",
             read_file(data_path("experiments/mrpc32/train.tsv")) + "1\tonly two\n");
  const fs::path path = dir / "stages.toml";
  write_file(path, study(fmt::format("task.data_dir = \"{}\"", (dir / "broken").string()), "[1]"));
  auto r =
      run_bertlab({"run", path.string(), "--output-dir", (dir / "runs").string(), "--jobs", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("'finetuned' not started: it starts from 'pretrained' ([model] "
                       "init_from), which failed"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "runs" / "stages" / "finetuned" / "metrics.jsonl"));
  // Selected alone, before its first stage ran: the missing weights are named.
  auto alone = run_bertlab(
      {"run", path.string(), "--output-dir", (dir / "runs2").string(), "--variant", "finetuned"});
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(
      alone.err.find("variant 'finetuned' starts from the final weights of 'pretrained' "
                     "([model] init_from), and " +
                     (dir / "runs2" / "stages" / "pretrained" / "model.safetensors").string() +
                     " is not there"),
      std::string::npos)
      << alone.err;
}

// The paired table of a study in stages pairs the fine-tuned variants with the reference and
// leaves out the pretraining stage (another task: its loss is another objective) and every
// metric only one side reports.
TEST(StagesReport, ThePairedTableLeavesOutAnotherTasksStage) {
  ResolvedExperiment experiment;
  experiment.reference = "scratch";
  experiment.seeds = {1, 2, 3};
  std::vector<VariantResult> results;
  for (const int64_t seed : {1, 2, 3}) {
    const double s = static_cast<double>(seed);
    VariantResult pretrain{"pretrain", seed, {}, 100, 6.0 + s / 10, {}, {}, 100, 10, {}};
    pretrain.eval_metrics = {{"masked_lm_accuracy", 0.1 * s}, {"masked_lm_loss", 6.0}};
    VariantResult scratch{"scratch", seed, {}, 100, 0.2, {}, {}, 100, 10, {}};
    scratch.eval_metrics = {{"eval_accuracy", 0.80 + 0.01 * s}, {"eval_loss", 0.6}};
    VariantResult pretrained{"pretrained", seed, {}, 100, 0.1, {}, {}, 100, 10, {}};
    pretrained.eval_metrics = {{"eval_accuracy", 0.85 + 0.011 * s}, {"eval_loss", 0.5 - s / 100}};
    results.insert(results.end(), {pretrain, scratch, pretrained});
  }
  const ComparisonTable t = seed_paired_table(experiment, results);
  std::vector<std::string> rows;
  for (const auto& row : t.rows) rows.push_back(row[0] + " " + row[1] + " " + row[2]);
  EXPECT_EQ(rows, (std::vector<std::string>{"pretrained final_loss 3", "pretrained eval_accuracy 3",
                                            "pretrained eval_loss 3"}))
      << fmt::format("{}", fmt::join(rows, "; "));
  EXPECT_EQ(t.rows[1].back(), "better");
}

}  // namespace
}  // namespace bertlab
