// The real `bertlab` executable end to end: a run with two variants and its output files,
// determinism, validation before any work, and `bertlab tokenize` on the reference strings.

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/safetensors.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "comm/nccl_communicator.h"
#include "commands/run_jobs.h"
#include "test_util.h"
#include "train/run_lock.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::read_jsonl;
using testing::run_bertlab;
using testing::TempDir;
using testing::without_timings;

class EndToEnd : public ::testing::Test {
 protected:
  // One run shared by the tests that read its outputs (training twice would double the time).
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    result_ = new testing::CommandResult(
        run_bertlab({"run", data_path("experiments/overfit.toml").string(), "--output-dir",
                     dir_->path().string()}));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete dir_;
  }
  static fs::path out(const std::string& rel) { return dir_->path() / "overfit" / rel; }

  static TempDir* dir_;
  static testing::CommandResult* result_;
};

TempDir* EndToEnd::dir_ = nullptr;
testing::CommandResult* EndToEnd::result_ = nullptr;

TEST_F(EndToEnd, RunWritesEveryOutputOfEveryVariant) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  for (const char* variant : {"dense", "sparse"}) {
    for (const char* file :
         {"resolved.toml", "metrics.jsonl", "eval_results.json", "model.safetensors"}) {
      EXPECT_TRUE(fs::is_regular_file(out(std::string(variant) + "/" + file)))
          << variant << "/" << file;
    }
    EXPECT_FALSE(fs::exists(out(std::string(variant) + "/metrics.jsonl.partial")));
    auto lines = read_jsonl(out(std::string(variant) + "/metrics.jsonl"));
    ASSERT_EQ(lines.size(), 10u);  // 100 steps, a line every 10
    for (const char* key : {"step", "epoch", "loss", "learning_rate", "grad_norm",
                            "examples_per_second", "elapsed_s", "data_s", "compute_s", "comm_s",
                            "optimizer_s", "comm_dense_bytes", "comm_sparse_bytes"}) {
      EXPECT_TRUE(lines.back().contains(key)) << key;
    }
    EXPECT_EQ(lines.back()["step"], 100);
    EXPECT_DOUBLE_EQ(lines.back()["epoch"].get<double>(), 100.0 * 8 / 32);
    EXPECT_LT(lines.back()["loss"].get<double>(), lines.front()["loss"].get<double>());
  }
  // The final weights, under Hugging Face names.
  std::map<std::string, std::string> metadata;
  auto weights = read_safetensors(out("dense/model.safetensors"), &metadata);
  EXPECT_EQ(metadata.at("global_step"), "100");
  std::map<std::string, at::Tensor> by_name(weights.begin(), weights.end());
  ASSERT_TRUE(by_name.count("bert.embeddings.word_embeddings.weight"));
  EXPECT_EQ(by_name.at("bert.embeddings.word_embeddings.weight").sizes().vec(),
            (std::vector<int64_t>{30522, 32}));
  EXPECT_TRUE(by_name.count("classifier.weight"));
  EXPECT_NE(metadata.at("bert_config").find("\"hidden_size\": 32"), std::string::npos)
      << metadata.at("bert_config");
  auto inspect = run_bertlab({"inspect", out("dense/model.safetensors").string(), "--stats"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find(": safetensors, " + std::to_string(weights.size()) + " tensors, "),
            std::string::npos)
      << inspect.out;
  EXPECT_NE(inspect.out.find("bert.embeddings.word_embeddings.weight"), std::string::npos);
  EXPECT_NE(inspect.out.find("[30522, 32]  mean "), std::string::npos) << inspect.out;
  auto not_one = run_bertlab({"inspect", out("dense/resolved.toml").string()});
  EXPECT_EQ(not_one.exit_code, 1);
  EXPECT_NE(not_one.err.find("not a checkpoint bertlab reads"), std::string::npos) << not_one.err;
  EXPECT_TRUE(fs::is_regular_file(out("comparison.md")));
  EXPECT_TRUE(fs::is_regular_file(out("comparison.csv")));
  EXPECT_NE(result_->out.find("| dense |"), std::string::npos) << result_->out;
  EXPECT_NE(result_->out.find("| sparse |"), std::string::npos) << result_->out;
  // The start of the run names versions and where each plugin came from.
  EXPECT_NE(result_->err.find("[bertlab] bertlab "), std::string::npos) << result_->err;
  EXPECT_NE(result_->err.find("[plugin] classifier 0.1.0 from "), std::string::npos);
}

TEST_F(EndToEnd, TheClassifierOverfits32MrpcExamples) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  for (const char* variant : {"dense", "sparse"}) {
    auto results =
        nlohmann::json::parse(read_file(out(std::string(variant) + "/eval_results.json")));
    EXPECT_DOUBLE_EQ(results["eval_accuracy"].get<double>(), 1.0) << variant << results.dump();
    EXPECT_TRUE(results.contains("eval_f1"));
    EXPECT_TRUE(results.contains("eval_loss"));
    EXPECT_EQ(results["global_step"], 100);
  }
}

TEST_F(EndToEnd, SparseEmbeddingGradientsGiveTheDenseUpdate) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  // comparison.csv: the last column is the largest parameter difference from `dense`.
  std::istringstream csv(read_file(out("comparison.csv")));
  std::string header, dense, sparse;
  std::getline(csv, header);
  std::getline(csv, dense);
  std::getline(csv, sparse);
  EXPECT_EQ(header.substr(header.rfind(',') + 1), "max_param_diff_vs_dense");
  EXPECT_EQ(dense.substr(dense.rfind(',') + 1), "0");
  const double diff = std::stod(sparse.substr(sparse.rfind(',') + 1));
  EXPECT_LT(diff, 1e-3) << sparse;
}

TEST_F(EndToEnd, SameSeedAndOneThreadGiveIdenticalMetrics) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  TempDir again;
  auto r = run_bertlab({"run", data_path("experiments/overfit.toml").string(), "--variant", "dense",
                        "--output-dir", again.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(without_timings(again.path() / "overfit/dense/metrics.jsonl"),
            without_timings(out("dense/metrics.jsonl")));
  EXPECT_EQ(read_file(again.path() / "overfit/dense/eval_results.json"),
            read_file(out("dense/eval_results.json")));
  // The reference ran in this invocation too: its difference is 0.
  EXPECT_NE(read_file(again.path() / "overfit/comparison.csv").find(",0\n"), std::string::npos);
}

// Two `bertlab run`s of one variant: the second stops at once, naming the first (host, pid,
// command), and the first finishes with intact outputs. Before the lock both failed and left a
// metrics.jsonl mixed from both.
TEST(EndToEndRunLock, ASecondRunOfTheSameFolderStopsAndNamesTheFirst) {
  TempDir dir;
  const std::vector<std::string> args = {
      "run",          data_path("experiments/overfit.toml").string(),
      "--variant",    "dense",
      "--output-dir", dir.path().string(),
      "--set",        "train.num_train_steps=1000"};
  const fs::path lock = dir.path() / "overfit/dense/.bertlab.lock";
  testing::CommandResult first;
  std::thread runner([&] { first = run_bertlab(args); });
  // The lock is written once the first run holds it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         !(fs::exists(lock) && read_file(lock).find("pid") != std::string::npos)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto second = run_bertlab(args);
  runner.join();
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_NE(
      second.err.find("variant 'dense' of overfit: " + (dir.path() / "overfit/dense").string() +
                      " is being written by another run (host "),
      std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("command: " + std::string(BERTLAB_EXECUTABLE) + " run"),
            std::string::npos)
      << second.err;
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // The first run's metrics: whole JSON lines up to its last step.
  std::istringstream lines(read_file(dir.path() / "overfit/dense/metrics.jsonl"));
  std::string line, last;
  while (std::getline(lines, line)) {
    EXPECT_NO_THROW(nlohmann::json::parse(line)) << line;
    last = line;
  }
  EXPECT_EQ(nlohmann::json::parse(last)["step"].get<int64_t>(), 1000) << last;
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "overfit/dense/eval_results.json"));
  // Released when the first run ended; and held against a second holder in one process too.
  RunFolderLock again(dir.path() / "overfit/dense", "again");
  EXPECT_THROW(RunFolderLock(dir.path() / "overfit/dense", "third"), bertlab::Error);
}

// Two variants × 3 seeds (repeats = 3 from seed 7): a folder per run, each run's own seed, and a
// comparison whose statistics are recomputed here from the runs' summaries.
TEST(EndToEndSeeds, EveryVariantRunsOncePerSeedAndTheComparisonAggregatesThem) {
  TempDir dir;
  auto r = run_bertlab({"run", data_path("experiments/overfit.toml").string(), "--output-dir",
                        dir.path().string(), "--set", "experiment.repeats=3", "--set",
                        "train.num_train_steps=20"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path exp = dir.path() / "overfit";
  std::map<std::string, std::vector<double>> losses;
  for (const char* variant : {"dense", "sparse"}) {
    EXPECT_FALSE(fs::exists(exp / variant / "metrics.jsonl")) << "runs live in seed folders";
    for (int seed : {7, 8, 9}) {
      const fs::path run = exp / variant / ("seed-" + std::to_string(seed));
      ASSERT_TRUE(fs::is_regular_file(run / "metrics.jsonl")) << run;
      EXPECT_NE(read_file(run / "resolved.toml").find("seed = " + std::to_string(seed)),
                std::string::npos);
      const auto summary = nlohmann::json::parse(read_file(run / "run_summary.json"));
      EXPECT_EQ(summary["seed"].get<int>(), seed);
      losses[variant].push_back(summary["final_loss"].get<double>());
    }
  }
  // The seed changes the run: the losses differ.
  EXPECT_NE(losses["dense"][0], losses["dense"][1]);
  // comparison.csv: the issue's columns, and the statistics of the summaries' final losses.
  std::istringstream csv(read_file(exp / "comparison.csv"));
  std::string header, dense, sparse;
  std::getline(csv, header);
  std::getline(csv, dense);
  std::getline(csv, sparse);
  auto split = [](const std::string& line) {
    std::vector<std::string> fields;
    std::stringstream in(line);
    std::string f;
    while (std::getline(in, f, ',')) fields.push_back(f);
    return fields;
  };
  const auto names = split(header);
  auto column = [&](const std::string& row, const std::string& name) {
    const auto at = std::find(names.begin(), names.end(), name);
    EXPECT_NE(at, names.end()) << name << " in " << header;
    if (at == names.end()) return std::string();
    return split(row).at(static_cast<size_t>(at - names.begin()));
  };
  for (const std::string m : {"final_loss", "eval_accuracy"}) {
    for (const char* suffix :
         {"_mean", "_std", "_ci95", "_min", "_max", "_delta_vs_ref", "_p_vs_ref"}) {
      column(dense, m + suffix);
    }
  }
  EXPECT_EQ(column(dense, "seeds"), "3");
  const auto& d = losses["dense"];
  const double mean = (d[0] + d[1] + d[2]) / 3;
  const double sd = std::sqrt(((d[0] - mean) * (d[0] - mean) + (d[1] - mean) * (d[1] - mean) +
                               (d[2] - mean) * (d[2] - mean)) /
                              2);
  EXPECT_NEAR(std::stod(column(dense, "final_loss_mean")), mean, 1e-5 * std::abs(mean));
  EXPECT_NEAR(std::stod(column(dense, "final_loss_std")), sd, 1e-5 * sd);
  // t(0.975, 2) = 4.302652729911275 (the two-degree closed form (2p − 1)/sqrt(2p(1 − p))).
  EXPECT_NEAR(std::stod(column(dense, "final_loss_ci95")), 4.302652729911275 * sd / std::sqrt(3.0),
              1e-5 * sd);
  EXPECT_EQ(column(dense, "final_loss_verdict_vs_ref"), "reference");
  const auto& s = losses["sparse"];
  const double delta = ((s[0] - d[0]) + (s[1] - d[1]) + (s[2] - d[2])) / 3;
  EXPECT_NEAR(std::stod(column(sparse, "final_loss_delta_vs_ref")), delta, 1e-6);
  const std::string md = read_file(exp / "comparison.md");
  EXPECT_NE(md.find("Every variant ran once per seed (7, 8, 9)"), std::string::npos) << md;
  EXPECT_NE(md.find("| dense | 3 |"), std::string::npos) << md;
  const std::string html = read_file(exp / "report.html");
  EXPECT_NE(html.find("paired by seed"), std::string::npos);
  // The plots: a line per variant (mean over seeds) with its band, not a line per run.
  const std::string loss = read_file(exp / "plots/loss.svg");
  EXPECT_NE(loss.find("mean over seeds; band: min to max"), std::string::npos);
  EXPECT_EQ(loss.find("seed 8"), std::string::npos) << "a line per variant";
  EXPECT_NE(loss.find("<polygon"), std::string::npos);
  EXPECT_NE(read_file(exp / "plots/eval.svg").find("stroke=\"#222\""), std::string::npos);
  // bertlab compare rebuilds the same table from the folders.
  const std::string csv_text = read_file(exp / "comparison.csv");
  fs::remove(exp / "comparison.csv");
  auto c = run_bertlab({"compare", exp.string()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(read_file(exp / "comparison.csv"), csv_text);
}

// --jobs 2: the 6 runs as processes, 2 at a time, with the same metrics as one after another; a
// second invocation runs nothing (every run finished with the same configuration).
TEST(EndToEndJobs, TwoAtATimeGiveTheSameMetricsAndASecondInvocationSkipsEveryRun) {
  TempDir one, two;
  const std::vector<std::string> common = {"run",   data_path("experiments/overfit.toml").string(),
                                           "--set", "experiment.repeats=3",
                                           "--set", "train.num_train_steps=20"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  auto serial = run_bertlab(with({"--output-dir", one.path().string()}));
  ASSERT_EQ(serial.exit_code, 0) << serial.err;
  auto parallel = run_bertlab(with({"--output-dir", two.path().string(), "--jobs", "2"}));
  ASSERT_EQ(parallel.exit_code, 0) << parallel.out << parallel.err;
  EXPECT_NE(parallel.out.find("[sparse seed 9] "), std::string::npos) << parallel.out;
  EXPECT_NE(parallel.err.find("6/6 runs done"), std::string::npos) << parallel.err;
  for (const char* variant : {"dense", "sparse"}) {
    for (const char* seed : {"seed-7", "seed-8", "seed-9"}) {
      const fs::path run = fs::path("overfit") / variant / seed;
      EXPECT_EQ(without_timings(two.path() / run / "metrics.jsonl"),
                without_timings(one.path() / run / "metrics.jsonl"))
          << run;
      EXPECT_EQ(read_file(two.path() / run / "eval_results.json"),
                read_file(one.path() / run / "eval_results.json"))
          << run;
      EXPECT_EQ(read_file(two.path() / run / "model.safetensors"),
                read_file(one.path() / run / "model.safetensors"))
          << run;
    }
  }
  const std::string csv = read_file(two.path() / "overfit/comparison.csv");
  auto again = run_bertlab(with({"--output-dir", two.path().string(), "--jobs", "2"}));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("0 run(s) to do, 2 at a time"), std::string::npos) << again.err;
  EXPECT_EQ(again.out.find("[dense seed 7] "), std::string::npos) << "nothing may run again";
  EXPECT_EQ(read_file(two.path() / "overfit/comparison.csv"), csv);
  // One after another skips them too; --rerun runs them.
  auto serial_again = run_bertlab(with({"--output-dir", one.path().string()}));
  EXPECT_NE(serial_again.err.find("variant 'dense' (seed 8): finished before with the same "
                                  "configuration"),
            std::string::npos)
      << serial_again.err;
  auto rerun = run_bertlab(with(
      {"--output-dir", one.path().string(), "--variant", "dense", "--run-seed", "8", "--rerun"}));
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_NE(rerun.err.find("variant 'dense' (seed 8): task"), std::string::npos) << rerun.err;
  EXPECT_EQ(rerun.err.find("seed 7"), std::string::npos) << rerun.err;
}

// SIGINT to `bertlab run --jobs 2` stops both runs after their current step with a checkpoint;
// the next invocation resumes them and ends with the metrics of an uninterrupted run.
TEST(EndToEndJobs, AStoppedStudyResumesWhereItsRunsStopped) {
  TempDir dir, straight;
  const std::vector<std::string> common = {
      "run",       data_path("experiments/overfit.toml").string(),
      "--variant", "dense",
      "--set",     "experiment.repeats=2",
      "--set",     "train.num_train_steps=200",
      "--set",     "train.save_checkpoints_steps=10"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const fs::path checkpoints = dir.path() / "overfit/dense/seed-8/checkpoints";
  auto stopped = testing::run_bertlab_signalled(
      with({"--output-dir", dir.path().string(), "--jobs", "2"}), SIGINT, [&] {
        std::error_code ec;
        return fs::is_directory(checkpoints, ec) && !fs::is_empty(checkpoints, ec);
      });
  EXPECT_EQ(stopped.exit_code, 128 + SIGINT) << stopped.out << stopped.err;
  EXPECT_NE(stopped.err.find("SIGINT: stopping 2 run(s) after their current step"),
            std::string::npos)
      << stopped.err;
  EXPECT_FALSE(fs::exists(dir.path() / "overfit/dense/seed-8/run_summary.json"));
  auto resumed = run_bertlab(with({"--output-dir", dir.path().string(), "--jobs", "2"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("[dense seed 8] "), std::string::npos);
  EXPECT_NE(resumed.out.find("resuming from"), std::string::npos) << resumed.out;
  auto uninterrupted = run_bertlab(with({"--output-dir", straight.path().string()}));
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;
  for (const char* seed : {"seed-7", "seed-8"}) {
    const fs::path run = fs::path("overfit/dense") / seed;
    EXPECT_EQ(without_timings(dir.path() / run / "metrics.jsonl"),
              without_timings(straight.path() / run / "metrics.jsonl"))
        << run;
  }
}

// How --jobs shares GPUs out (a CUDA run is refused at validation in this CPU build, so the
// placement is checked on the pool itself): each run its own devices, lowest first, a run that
// needs more than are free waits, and CUDA_VISIBLE_DEVICES names what this process may use.
TEST(GpuPool, EachRunGetsDevicesOfItsOwnAndWaitsForThem) {
  GpuPool pool({"0", "1", "2", "3"});
  const auto a = pool.take(1);
  const auto b = pool.take(2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, (std::vector<std::string>{"0"}));
  EXPECT_EQ(*b, (std::vector<std::string>{"1", "2"}));
  EXPECT_FALSE(pool.take(2)) << "one is free";
  pool.give_back(*a);
  EXPECT_EQ(pool.free(), 2u);
  EXPECT_EQ(*pool.take(2), (std::vector<std::string>{"0", "3"}));
  EXPECT_EQ(*pool.take(0), std::vector<std::string>{});  // a CPU run needs none
  const char* before = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "2, 5,GPU-1a2b", 1);
  GpuPool visible = GpuPool::visible();
  EXPECT_EQ(visible.size(), 3u);
  EXPECT_EQ(*visible.take(3), (std::vector<std::string>{"2", "5", "GPU-1a2b"}));
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(GpuPool::visible().size(), static_cast<size_t>(cuda_device_count()));
  if (before != nullptr) ::setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
}

TEST(EndToEndValidation, ATypoStopsTheRunBeforeAnyWork) {
  TempDir dir;
  std::string text = read_file(data_path("experiments/overfit.toml"));
  text.replace(text.find("learning_rate = 2e-3"), 20, "learning_rat = 2e-3");
  // Written beside the original so its relative paths still resolve.
  const fs::path path = data_path("experiments") / ("typo-" + std::to_string(::getpid()) + ".toml");
  testing::write_file(path, text);
  auto r = run_bertlab({"run", path.string(), "--output-dir", dir.path().string()});
  auto v = run_bertlab({"validate", path.string()});
  fs::remove(path);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(path.string() + ":24:1: optimizer.learning_rat: unknown key for optimizer "
                                       "'adam_weight_decay'; did you mean 'learning_rate'?"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "overfit")) << "nothing may be written before validation";
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_EQ(v.err, r.err);
}

TEST(EndToEndValidation, ValidatePrintsEveryResolvedVariant) {
  auto r = run_bertlab({"validate", data_path("experiments/overfit.toml").string(), "--set",
                        "optimizer.learning_rate=1e-4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# variant 'dense'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# variant 'sparse'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("learning_rate = 0.0001\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sparse_embeddings = true\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 variant(s) valid"), std::string::npos) << r.out;
}

// One value per --set and --variant: the experiment file after them is still the positional.
TEST(EndToEndValidation, FlagsBeforeTheFileTakeOneValueEach) {
  auto r = run_bertlab({"validate", "--set", "optimizer.learning_rate=1e-4", "--variant", "sparse",
                        data_path("experiments/overfit.toml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("learning_rate = 0.0001\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("# variant 'dense'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 variant(s) valid"), std::string::npos) << r.out;
}

TEST(EndToEndTokenize, ReproducesTheReferenceIdsOfAll46Strings) {
  const std::string inp = read_file(data_path("tokenizer/ggml-vocab-bert-bge.gguf.inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> strings;
  for (size_t pos = 0; pos < inp.size();) {
    size_t end = inp.find(sep, pos);
    if (end == std::string::npos) break;
    strings.push_back(inp.substr(pos, end - pos));
    pos = end + sep.size();
  }
  ASSERT_EQ(strings.size(), 46u);
  // Every line of every string goes through one `bertlab tokenize --ids`; a string's ids are
  // the ids of its lines in order (a newline only separates words).
  std::string input;
  std::vector<size_t> line_counts;
  for (const auto& s : strings) {
    size_t lines = 1;
    for (char c : s) lines += c == '\n';
    line_counts.push_back(lines);
    input += s + "\n";
  }
  auto r = run_bertlab(
      {"tokenize", "--vocab", data_path("vocab/bert-base-uncased/vocab.txt").string(), "--ids"},
      input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream got(r.out);
  std::istringstream expected(read_file(data_path("tokenizer/ggml-vocab-bert-bge.gguf.out")));
  for (size_t i = 0; i < strings.size(); ++i) {
    std::string ids;
    for (size_t k = 0; k < line_counts[i]; ++k) {
      std::string line;
      ASSERT_TRUE(std::getline(got, line));
      if (!line.empty()) ids += " " + line;
    }
    std::string want;
    std::getline(expected, want);
    EXPECT_EQ(ids, want) << "string #" << i << ": '" << strings[i] << "'";
  }
}

TEST(EndToEndTokenize, InvalidUtf8NamesLineAndByteOffset) {
  auto r =
      run_bertlab({"tokenize", "--vocab", data_path("vocab/bert-base-uncased/vocab.txt").string()},
                  "fine\nbad \xff byte\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("stdin: line 2, byte offset 4: invalid UTF-8"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

/// comparison.csv → variant → its last column (the difference from the reference).
std::map<std::string, double> parameter_differences(const fs::path& csv_path) {
  std::map<std::string, double> out;
  std::istringstream csv(read_file(csv_path));
  std::string line;
  std::getline(csv, line);  // header
  while (std::getline(csv, line)) {
    out[line.substr(0, line.find(','))] = std::stod(line.substr(line.rfind(',') + 1));
  }
  return out;
}

TEST(EndToEndStrategies, ReplicasGiveTheSingleDeviceUpdateAndEmulationsDoNot) {
  TempDir dir;
  auto r = run_bertlab({"run", data_path("experiments/gradient_averaging.toml").string(),
                        "--output-dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto diff = parameter_differences(dir.path() / "gradient-averaging/comparison.csv");
  ASSERT_EQ(diff.size(), 10u);
  // 2 and 4 thread ranks over Gloo: the same parameters as one device after 3 Adam steps, up to
  // float summation order.
  for (const char* v : {"mirrored-2", "sparse-allgather-2", "mirrored-4", "sparse-allgather-4"}) {
    EXPECT_LT(diff.at(v), 1e-5) << v;
  }
  // The published averaging bugs move the parameters measurably.
  for (const char* v : {"no-divide-2", "first-replica-indices-2", "scatter-duplicates"}) {
    EXPECT_GT(diff.at(v), 1e-4) << v;
  }
  // Each rank's payload: mirrored sends the densified embedding, sparse_allgather its rows.
  auto last = [&](const char* variant) {
    std::istringstream in(read_file(dir.path() / "gradient-averaging" / variant / "metrics.jsonl"));
    std::string line, final_line;
    while (std::getline(in, line)) final_line = line;
    return nlohmann::json::parse(final_line);
  };
  const double embedding_bytes = 30522.0 * 32 * 4;
  EXPECT_GT(last("mirrored-2")["comm_dense_bytes"].get<double>(), embedding_bytes);
  EXPECT_EQ(last("mirrored-2")["comm_sparse_bytes"].get<double>(), 0.0);
  EXPECT_LT(last("sparse-allgather-2")["comm_dense_bytes"].get<double>(), embedding_bytes);
  EXPECT_GT(last("sparse-allgather-2")["comm_sparse_bytes"].get<double>(), 0.0);
  EXPECT_EQ(last("single")["comm_dense_bytes"].get<double>(), 0.0);
  // sparse_allgather says how it exchanged the embedding's rows: gathered, not densified.
  const auto rows = last("sparse-allgather-2");
  EXPECT_EQ(rows["strategy.sparse_exchanges"].get<double>(), 1.0);
  EXPECT_EQ(rows["strategy.sparse_densified"].get<double>(), 0.0);
  EXPECT_GT(rows["strategy.sparse_max_rows"].get<double>(), 0.0);
  EXPECT_FALSE(last("mirrored-2").contains("strategy.sparse_exchanges"));
  // Adam's two moments of every parameter, on each of mirrored's ranks.
  EXPECT_GT(last("mirrored-2")["optimizer_state_bytes"].get<double>(), 2 * embedding_bytes);
  // Clipping by the norm of the stored rows clips harder than by the norm of the dense gradient.
  EXPECT_GT(std::abs(diff.at("uncoalesced-clip") - diff.at("coalesced-clip")), 1e-5);
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

fs::path gradient_averaging_experiment() {
  return fs::path(BERTLAB_SOURCE_DIR) / "experiments" / "gradient-averaging.toml";
}

// The committed baselines are checked with every initial weight moved one ulp (--perturb-ulp):
// every float result then differs by rounding from the machine that wrote them, as on another
// CPU or BLAS kernel, and each must still hold (docs/strategy-contracts.md, "Regression
// baselines"). The line printed says how much of its tolerance the closest field used.
TEST(EndToEndGradcheck, TheGradientAveragingExperimentMeetsEveryExpectation) {
  TempDir dir;
  auto r = run_bertlab(
      {"gradcheck", gradient_averaging_experiment().string(), "--output-dir", dir.path().string(),
       "--perturb-ulp", "1", "--baseline",
       (fs::path(BERTLAB_SOURCE_DIR) / "experiments" / "gradient-averaging.baseline.json")
           .string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every variant unchanged; largest use of a tolerance"), std::string::npos)
      << r.out;
  auto json = nlohmann::json::parse(read_file(dir.path() / "gradient-averaging/gradcheck.json"));
  const auto& v = json["variants"];
  for (const char* name :
       {"single", "mirrored-2", "sparse-allgather-2", "mirrored-4", "sparse-allgather-4",
        "mirrored-2-overlap", "sparse-allgather-2-overlap"}) {
    EXPECT_TRUE(v[name]["match"].get<bool>()) << name;
  }
  for (const char* name : {"first-replica-indices-2", "no-divide-2", "uncoalesced-clip",
                           "scatter-duplicates", "mirrored-4-replica-dropout"}) {
    EXPECT_FALSE(v[name]["match"].get<bool>()) << name;
  }
  // Dropout is on (0.1) with per-example masks; masks drawn per replica are named as the cause.
  EXPECT_NE(r.out.find("`mirrored-4-replica-dropout`, besides the averaging, differs from the "
                       "reference in: dropout_rng = \"replica\" with dropout 0.1"),
            std::string::npos)
      << r.out;
  // Concatenating two replicas' rows without dividing gives twice the embedding gradient.
  EXPECT_NEAR(v["no-divide-2"]["embedding_grad_ratio"].get<double>(), 2.0, 1e-5);
  EXPECT_NEAR(v["mirrored-4"]["embedding_grad_ratio"].get<double>(), 1.0, 1e-5);
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "gradient-averaging/gradcheck.md"));
}

// What scripts/quickstart.sh proves after its table: the sparse word-embedding gradient gives
// the dense one's update, step by step, on the quickstart's own experiment (TREC-6, dropout 0.1).
TEST(EndToEndGradcheck, TheQuickstartsTwoVariantsGiveTheSameUpdate) {
  TempDir dir;
  auto r = run_bertlab({"gradcheck",
                        (fs::path(BERTLAB_SOURCE_DIR) / "experiments" / "quickstart.toml").string(),
                        "--steps", "3", "--output-dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto json = nlohmann::json::parse(read_file(dir.path() / "quickstart/gradcheck.json"));
  const auto& sparse = json["variants"]["sparse-embeddings"];
  EXPECT_EQ(sparse["contract"]["kind"], "exact") << sparse.dump();
  EXPECT_TRUE(sparse["contract"]["holds"].get<bool>()) << sparse.dump();
  EXPECT_TRUE(sparse["params"]["close"].get<bool>()) << sparse.dump();
  EXPECT_NE(r.out.find("| sparse-embeddings | contract | exact |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

// Every strategy against the contract its plugin declares; each kind of check (bounded, exact
// until a step, error feedback, replicas after a sync) has a variant that breaks it.
TEST(EndToEndGradcheck, TheStrategyContractsExperimentKeepsEveryContract) {
  TempDir dir;
  const fs::path experiments = fs::path(BERTLAB_SOURCE_DIR) / "experiments";
  auto r = run_bertlab({"gradcheck", (experiments / "strategy-contracts.toml").string(),
                        "--output-dir", dir.path().string(), "--perturb-ulp", "1", "--baseline",
                        (experiments / "strategy-contracts.baseline.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every variant unchanged; largest use of a tolerance"), std::string::npos)
      << r.out;
  auto json = nlohmann::json::parse(read_file(dir.path() / "strategy-contracts/gradcheck.json"));
  const auto& v = json["variants"];
  for (const char* name :
       {"mirrored-fp16-2", "mirrored-fp16-4", "mirrored-bf16-2", "mirrored-bf16-4", "powersgd-2",
        "powersgd-4", "local-sgd-2", "local-sgd-4", "zero1-2", "zero1-4"}) {
    EXPECT_TRUE(v[name]["contract"]["holds"].get<bool>()) << name;
  }
  // The bounded rows stay within their bound, yet not trivially: they differ from the exact mean.
  EXPECT_LE(v["mirrored-fp16-2"]["contract"]["bound_ratio"].get<double>(), 1.0);
  EXPECT_GT(v["mirrored-fp16-2"]["dense_grad"]["max_abs"].get<double>(), 1e-6);
  EXPECT_LT(v["powersgd-2"]["contract"]["error_feedback"].get<double>(), 1e-6);
  EXPECT_EQ(v["local-sgd-4"]["contract"]["sync_difference"].get<double>(), 0.0);
  // Each emulation breaks its contract, and the note says how.
  EXPECT_FALSE(v["cast-before-divide-2"]["contract"]["holds"].get<bool>());
  EXPECT_TRUE(v["cast-before-divide-2"]["contract"]["bound_ratio"].is_null());  // infinite
  EXPECT_GT(v["powersgd-residual-from-average-2"]["contract"]["error_feedback"].get<double>(),
            1e-3);
  EXPECT_GT(v["local-sgd-own-rank-first-4"]["contract"]["sync_difference"].get<double>(), 0.0);
  // PyTorch #61814's divide_after: the fix's bits in float32 and bfloat16 with 4 replicas; with
  // float16 at the same loss scale as the fixed row, the rows' sum (only it) overflows.
  EXPECT_TRUE(v["divide-after-4"]["contract"]["holds"].get<bool>());
  EXPECT_EQ(v["divide-after-4"]["sparse_grad"], v["sparse-allgather-4"]["sparse_grad"]);
  EXPECT_TRUE(v["divide-after-bf16-4"]["contract"]["holds"].get<bool>());
  EXPECT_EQ(v["divide-after-bf16-4"]["sparse_grad"], v["sparse-allgather-bf16-4"]["sparse_grad"]);
  EXPECT_TRUE(v["sparse-allgather-fp16-4-scaled"]["contract"]["holds"].get<bool>());
  EXPECT_FALSE(v["divide-after-fp16-4-scaled"]["contract"]["holds"].get<bool>());
  EXPECT_TRUE(v["divide-after-fp16-4-scaled"]["sparse_grad"]["max_abs"].is_null());  // inf
  EXPECT_TRUE(v["divide-after-fp16-4-scaled"]["dense_grad"]["max_abs"].is_number());
  EXPECT_FALSE(v["local-sgd-4-replica-dropout"]["contract"]["holds"].get<bool>());
  // zero1: exact, and each rank's state within one parameter's of 1/N; unsharded: not.
  EXPECT_TRUE(v["zero1-4"]["params"]["close"].get<bool>());
  EXPECT_LE(v["zero1-4"]["contract"]["state_share"].get<double>(), 1.0);
  EXPECT_FALSE(v["zero1-unsharded-2"]["contract"]["holds"].get<bool>());
  EXPECT_TRUE(v["zero1-unsharded-2"]["params"]["close"].get<bool>());
  EXPECT_NE(r.out.find("the optimizer state of 41 parameters is held by more than one rank"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("`powersgd-residual-from-average-2` does not keep its contract"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gradients before step 2 differ from the reference"), std::string::npos)
      << r.out;
  // report.html: the table, and a log-scale difference plot per variant but the reference.
  const std::string html = read_file(dir.path() / "strategy-contracts/report.html");
  EXPECT_NE(html.find("<h2>Contracts</h2>"), std::string::npos);
  for (const auto& [name, row] : v.items()) {
    EXPECT_EQ(html.find("id=\"diff-" + name + "\"") == std::string::npos, name == "single") << name;
  }
  EXPECT_NE(html.find("max |difference| (log scale)"), std::string::npos);
  EXPECT_NE(html.find(">inf</text>"), std::string::npos);  // cast-before-divide-2's gradient
}

// A contract a strategy does not keep fails a variant that expects it.
TEST(EndToEndGradcheck, ABrokenContractFailsItsVariant) {
  const fs::path source = fs::path(BERTLAB_SOURCE_DIR) / "experiments" / "strategy-contracts.toml";
  std::string text = read_file(source);
  const std::string marker = "emulate = \"residual_from_average\" }\nexpect = \"differ\"";
  const size_t at = text.find(marker);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, marker.size(), "emulate = \"residual_from_average\" }");
  const fs::path copy =
      source.parent_path() / ("contracts-copy-" + std::to_string(::getpid()) + ".toml");
  testing::write_file(copy, text);
  TempDir dir;
  auto r = run_bertlab({"gradcheck", copy.string(), "--output-dir", dir.path().string(),
                        "--variant", "single", "--variant", "powersgd-residual-from-average-2"});
  fs::remove(copy);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("| powersgd-residual-from-average-2 | contract |"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("FAIL: error feedback not conserved"), std::string::npos) << r.out;
}

TEST(EndToEndGradcheck, AnEmulationExpectedToMatchFails) {
  std::string text = read_file(gradient_averaging_experiment());
  const std::string marker = "emulate = \"no_divide\" }\nexpect = \"differ\"";
  const size_t at = text.find(marker);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, marker.size(), "emulate = \"no_divide\" }\nexpect = \"match\"");
  // Beside the original, so its relative data paths resolve.
  const fs::path copy = gradient_averaging_experiment().parent_path() /
                        ("gradcheck-copy-" + std::to_string(::getpid()) + ".toml");
  testing::write_file(copy, text);
  TempDir dir;
  auto r = run_bertlab({"gradcheck", copy.string(), "--output-dir", dir.path().string(),
                        "--variant", "single", "--variant", "no-divide-2"});
  fs::remove(copy);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("| no-divide-2 | match |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
}

// Regressions against the committed baseline, on weights moved by one ulp (so the failures are
// the regressions', not rounding's): a changed divide, dropped rows and a dropped bucket (a test
// plugin) in exact rows, a changed algorithm where the contract bounds nothing, and an emulated
// bug that no longer shows.
TEST(EndToEndGradcheck, ACommittedBaselineFailsRegressions) {
  const fs::path experiments = fs::path(BERTLAB_SOURCE_DIR) / "experiments";
  std::string text = read_file(experiments / "strategy-contracts.toml");
  const std::vector<std::pair<std::string, std::string>> changes = {
      {"{ plugin = \"sparse_allgather\", replicas = 2 }",
       "{ plugin = \"sparse_allgather\", replicas = 2, emulate = \"no_divide\" }"},
      {"name = \"sparse-allgather-4\"\nstrategy = { plugin = \"sparse_allgather\", replicas = 4 }",
       "name = \"sparse-allgather-4\"\nstrategy = { plugin = \"sparse_allgather\", replicas = 4, "
       "emulate = \"first_replica_indices\" }"},
      {"replicas = 2, rank = 1, start_step = 1 }", "replicas = 2, rank = 2, start_step = 1 }"},
      {"start_step = 1, emulate = \"residual_from_average\" }", "start_step = 1 }"},
      {"name = \"mirrored-2\"\nstrategy = { plugin = \"mirrored\", replicas = 2 }",
       "name = \"mirrored-2\"\nstrategy = { plugin = \"test_dropped_bucket\", replicas = 2 }"}};
  for (const auto& [from, to] : changes) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  }
  // Beside the original, so its relative data paths resolve.
  const fs::path copy = experiments / ("regressed-" + std::to_string(::getpid()) + ".toml");
  testing::write_file(copy, text);
  TempDir dir;
  std::vector<std::string> args = {
      "gradcheck",     copy.string(),
      "--output-dir",  dir.path().string(),
      "--perturb-ulp", "1",
      "--baseline",    (experiments / "strategy-contracts.baseline.json").string(),
      "--plugin-dir",  (fs::path(BERTLAB_TEST_PLUGIN_DIR) / "dropped_bucket").string()};
  for (const char* v : {"single", "mirrored-2", "mirrored-bf16-2", "sparse-allgather-2",
                        "sparse-allgather-4", "powersgd-2", "powersgd-residual-from-average-2"}) {
    args.insert(args.end(), {"--variant", v});
  }
  auto r = run_bertlab(args);
  fs::remove(copy);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  // The changed divide shows at once; rows dropped under the first replica's indices later.
  EXPECT_NE(r.out.find("baseline: variant 'sparse-allgather-2': grad_norms[step 1]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("baseline: variant 'sparse-allgather-4': "), std::string::npos) << r.out;
  // A bucket never all-reduced: one parameter's gradient is rank 0's own.
  EXPECT_NE(r.out.find("baseline: variant 'mirrored-2': grad_norms[step 1]"), std::string::npos)
      << r.out;
  // PowerSGD's step 1 is exact whatever the rank; from step 2 the approximation differs.
  EXPECT_EQ(r.out.find("baseline: variant 'powersgd-2': grad_norms[step 1]"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("baseline: variant 'powersgd-2': grad_norms[step 2]"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(unbounded tolerance"), std::string::npos) << r.out;
  // Without its emulation the residual is conserved: the bug no longer shows, and the verdict
  // the baseline keeps for this differ row changes.
  EXPECT_NE(r.out.find("baseline: variant 'powersgd-residual-from-average-2' (expect differ): "
                       "FAIL, broken []"),
            std::string::npos)
      << r.out;
  // Unchanged rows hold, the bounded one on weights moved by one ulp.
  EXPECT_EQ(r.out.find("baseline: variant 'single'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("baseline: variant 'mirrored-bf16-2'"), std::string::npos) << r.out;
}

/// `bertlab gradcheck` of gradient-averaging.toml's `single` and `variant`, its files in `dir`,
/// then `more` (--save-baseline FILE, --baseline FILE, --set ...).
testing::CommandResult gradcheck_against_single(const TempDir& dir, const std::string& variant,
                                                const std::vector<std::string>& more) {
  std::vector<std::string> args = {"gradcheck",    gradient_averaging_experiment().string(),
                                   "--variant",    "single",
                                   "--variant",    variant,
                                   "--output-dir", dir.path().string()};
  args.insert(args.end(), more.begin(), more.end());
  return run_bertlab(args);
}

// The file says where it was made; a comparison on a machine unlike it says so, and how.
TEST(EndToEndGradcheck, ABaselineRecordsItsMachine) {
  TempDir dir;
  const fs::path baseline = dir / "baseline.json";
  auto save = gradcheck_against_single(dir, "no-divide-2",
                                       {"--steps", "1", "--save-baseline", baseline.string()});
  ASSERT_EQ(save.exit_code, 0) << save.out << save.err;
  auto json = nlohmann::json::parse(read_file(baseline));
  EXPECT_EQ(json["format"], 2);
  for (const char* key : {"cpu", "cpu_flags", "aten_cpu_capability", "blas", "blas_core", "gemm",
                          "openblas_coretype", "libtorch", "intra_op_threads"}) {
    EXPECT_TRUE(json["machine"].contains(key)) << key;
  }
  const auto& single = json["variants"]["single"];
  EXPECT_EQ(single["compared"], "numbers");
  EXPECT_EQ(single["tolerance"]["grad_norms"][0]["rule"], "exact");
  const auto& bug = json["variants"]["no-divide-2"];
  EXPECT_EQ(bug["compared"], "verdict");
  EXPECT_FALSE(bug.contains("grad_norms"));
  EXPECT_EQ(bug["verdict"]["first_difference"], "step 1: sparse gradient");
  EXPECT_EQ(bug["verdict"]["broken"], nlohmann::json::array({"reference"}));
  // Written "elsewhere": another CPU. The check passes and names both machines.
  json["machine"]["cpu"] = "Another CPU";
  json["machine"]["blas_core"] = "Haswell";
  testing::write_file(baseline, json.dump(2));
  auto check = gradcheck_against_single(dir, "no-divide-2",
                                        {"--steps", "1", "--baseline", baseline.string()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("Baseline machine: Another CPU"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("blas_core: \""), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("\" in the baseline"), std::string::npos) << check.out;
}

TEST(EndToEndGradcheck, ABaselineCatchesAChangedStrategy) {
  TempDir dir;
  const fs::path baseline = dir / "baseline.json";
  auto save =
      gradcheck_against_single(dir, "sparse-allgather-2", {"--save-baseline", baseline.string()});
  ASSERT_EQ(save.exit_code, 0) << save.out << save.err;
  // The same variants with another clipping threshold: the numbers move, the baseline fails.
  auto changed = gradcheck_against_single(
      dir, "sparse-allgather-2",
      {"--set", "optimizer.clip_norm=0.05", "--baseline", baseline.string()});
  EXPECT_EQ(changed.exit_code, 1) << changed.out << changed.err;
  EXPECT_NE(changed.out.find("baseline: variant 'sparse-allgather-2': "), std::string::npos)
      << changed.out;
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

TEST(EndToEndLaunch, TwoProcessesOverLoopbackGlooMatchOneDevice) {
  TempDir dir;
  auto r = run_bertlab({"launch", "--nproc", "2", "--", BERTLAB_EXECUTABLE, "gradcheck",
                        data_path("experiments/launch.toml").string(), "--output-dir",
                        dir.path().string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[rank 0] | sparse-allgather-env-2 | contract | exact |"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  // Only rank 0 prints the table and writes files.
  EXPECT_EQ(r.out.find("[rank 1] | single |"), std::string::npos) << r.out;
  auto json = nlohmann::json::parse(read_file(dir.path() / "launch/gradcheck.json"));
  EXPECT_TRUE(json["variants"]["sparse-allgather-env-2"]["match"].get<bool>());
  EXPECT_TRUE(json["variants"]["mirrored-env-2"]["match"].get<bool>());
}

// torchrun 2.x's elastic agent serves the store at MASTER_ADDR:MASTER_PORT itself and says so
// with TORCHELASTIC_USE_AGENT_STORE=True; the ranks join it as clients (a rank 0 serving the
// port too would fail: address in use). This test's process serves it, as the agent does.
TEST(EndToEndLaunch, UnderTorchrunsAgentStoreEveryRankJoinsItAsAClient) {
  c10d::TCPStoreOptions options;
  options.port = 0;  // any free port
  options.isServer = true;
  options.waitWorkers = false;
  c10d::TCPStore agent("127.0.0.1", options);
  TempDir dir;
  const std::string script =
      "MASTER_PORT=" + std::to_string(agent.getPort()) +
      " TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=2 exec " + BERTLAB_EXECUTABLE +
      " gradcheck " + data_path("experiments/launch.toml").string() +
      " --variant single --variant mirrored-env-2 --output-dir " + dir.path().string();
  auto r = run_bertlab({"launch", "--nproc", "2", "--", "/bin/sh", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("served by torchrun's agent"), std::string::npos)
      << r.out << r.err;
  EXPECT_NE(r.out.find("| mirrored-env-2 | contract | exact |"), std::string::npos) << r.out;
  // The ranks' keys went to the agent's store, under the attempt's prefix.
  EXPECT_GT(agent.getNumKeys(), 2);
}

TEST(EndToEndLaunch, AFailingRankStopsTheOthersAndSetsTheExitCode) {
  // Rank 1 exits at once; rank 0 would wait for it in the rendezvous. launch stops rank 0 and
  // reports rank 1's exit code.
  const std::string script = std::string("if [ \"$RANK\" = 1 ]; then exit 3; fi; exec ") +
                             BERTLAB_EXECUTABLE + " run " +
                             data_path("experiments/launch.toml").string() +
                             " --variant mirrored-env-2 --output-dir /tmp/never-written";
  const auto start = std::chrono::steady_clock::now();
  auto r = run_bertlab({"launch", "--nproc", "2", "--", "/bin/sh", "-c", script});
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("launch: rank 1 exited with 3; stopping the other ranks"), std::string::npos)
      << r.err;
  EXPECT_LT(waited, 30.0);
}

// Rank 1 is killed (SIGKILL) once rank 0 has logged 5 steps: rank 0 fails naming rank 1 as the
// one that stopped responding, long before its 20 s timeout, and launch says rank 1 died first.
TEST(EndToEndLaunch, AKilledRankIsNamedByTheOthersAndByLaunch) {
  TempDir dir;
  const std::string partial = (dir.path() / "launch/mirrored-env-2/metrics.jsonl.partial").string();
  const std::string script =
      "if [ \"$RANK\" = 1 ]; then (while [ \"$(cat '" + partial +
      "' 2>/dev/null | wc -l)\" -lt 5 ]; do sleep 0.05; done; kill -9 $$) & fi; exec " +
      BERTLAB_EXECUTABLE + " run " + data_path("experiments/launch.toml").string() +
      " --variant mirrored-env-2 --output-dir " + dir.path().string() +
      " --set train.num_train_steps=100000 --set strategy.timeout_s=20";
  const auto start = std::chrono::steady_clock::now();
  auto r = run_bertlab({"launch", "--nproc", "2", "--", "/bin/sh", "-c", script});
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.out << r.err;
  EXPECT_NE(r.out.find("[rank 0] error: [comm] rank 0 of 2: all_reduce failed"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank 1 stopped responding (killed, crashed or stuck)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("launch: rank 1 failed first: it was killed by SIGKILL (exit code 137)"),
            std::string::npos)
      << r.err;
  EXPECT_LT(waited, 20.0 + 10.0 + 30.0) << "the timeout, 10 s, and the time to start";
}

// A rank started with another configuration (here another learning rate) is refused before
// training: every rank's resolved configuration is compared at the rendezvous.
TEST(EndToEndLaunch, ARankWithAnotherConfigurationIsRefusedAtStart) {
  TempDir dir;
  const std::string script =
      std::string(
          "extra=; if [ \"$RANK\" = 1 ]; then extra='--set optimizer.learning_rate=2e-3'; "
          "fi; exec ") +
      BERTLAB_EXECUTABLE + " run " + data_path("experiments/launch.toml").string() +
      " --variant mirrored-env-2 --output-dir " + dir.path().string() + " $extra";
  auto r = run_bertlab({"launch", "--nproc", "2", "--", "/bin/sh", "-c", script});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("optimizer.learning_rate differs between the ranks (rank 0: 0.001, rank 1: "
                       "0.002)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("every rank must run the same configuration"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir.path() / "launch/mirrored-env-2/metrics.jsonl"));
}

TEST(EndToEndLaunch, TheEnvLauncherWithoutRanksIsAConfigError) {
  auto r = run_bertlab({"run", data_path("experiments/launch.toml").string(), "--variant",
                        "mirrored-env-2", "--output-dir", "/tmp/never-written"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("uses launcher = \"env\", but RANK and WORLD_SIZE are not set"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

TEST(EndToEndBench, CommReportsBandwidthOfBothCollectives) {
  auto r = run_bertlab({"bench", "comm", "--world", "2", "--mb", "1", "--iters", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world"], 2);
  for (const char* key :
       {"all_reduce_s", "all_reduce_busbw_gbps", "all_gather_s", "all_gather_busbw_gbps"}) {
    EXPECT_GT(j[key].get<double>(), 0.0) << key;
  }
  auto bad = run_bertlab({"bench", "comm", "--world", "1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--world: must be >= 2, got 1"), std::string::npos) << bad.err;
}

// The bytes each strategy contributes for a V × H = 100 × 8 embedding gradient over 2 ranks,
// against what they must be: the float32 table, half of it in 16 bits, PowerSGD's P and Q of
// rank 2 ((V + H)·2 values), and the sparse rows as the cost model counts them.
TEST(EndToEndBench, ExchangeCountsTheBytesOfEachStrategy) {
  const auto bytes = [](std::vector<std::string> args) {
    std::vector<std::string> all{"bench",         "exchange", "--vocab-size", "100",
                                 "--hidden-size", "8",        "--tokens",     "16"};
    all.insert(all.end(), args.begin(), args.end());
    auto r = run_bertlab(all);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  };
  EXPECT_EQ(bytes({"--strategy", "mirrored"})["comm_dense_bytes"], 100 * 8 * 4);
  EXPECT_EQ(bytes({"--strategy", "mirrored", "--strategy-option",
                   "compression=fp16"})["comm_dense_bytes"],
            100 * 8 * 2);
  EXPECT_EQ(bytes({"--strategy", "powersgd", "--strategy-option", "rank=2", "--strategy-option",
                   "start_step=1"})["comm_dense_bytes"],
            (100 + 8) * 2 * 4);
  const auto rows = bytes({"--strategy", "sparse_allgather", "--sparse-embeddings"});
  EXPECT_EQ(rows["comm_dense_bytes"], 0);
  EXPECT_GT(rows["max_rows"].get<int64_t>(), 0);
  EXPECT_LE(rows["max_rows"].get<int64_t>(), 16);
  // The model's rows plus the row counts (one int64 per rank) the strategy gathers first.
  EXPECT_EQ(rows["ring_bytes"].get<double>(), rows["model_rows_bytes"].get<double>() + 8);

  auto bad =
      run_bertlab({"bench", "exchange", "--strategy", "powersgd", "--strategy-option", "rnk=1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--strategy-option rnk=1: the powersgd strategy has no option 'rnk'"),
            std::string::npos)
      << bad.err;
  bad = run_bertlab({"bench", "exchange", "--strategy", "powersgd", "--strategy-option", "rank=x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("'x' is not an int"), std::string::npos) << bad.err;
}

/// `bertlab bench step` of a tiny BERT (hidden 32, 2 layers, vocabulary 128), one timed step,
/// with `args` (batch, sequence, strategy, task ...) after it.
testing::CommandResult tiny_bench_step(const std::vector<std::string>& args) {
  std::vector<std::string> line = {"bench",
                                   "step",
                                   "--hidden-size",
                                   "32",
                                   "--num-hidden-layers",
                                   "2",
                                   "--num-attention-heads",
                                   "2",
                                   "--intermediate-size",
                                   "64",
                                   "--vocab-size",
                                   "128",
                                   "--steps",
                                   "1"};
  line.insert(line.end(), args.begin(), args.end());
  return run_bertlab(line);
}

// zero1 in `bench step`: each rank's optimizer holds its shard, so the most one rank holds is
// about half of what mirrored's ranks each hold (within the largest parameter's state).
TEST(EndToEndBench, StepReportsZero1sShardedOptimizerState) {
  const auto state = [](const std::string& strategy) {
    auto r =
        tiny_bench_step({"--strategy", strategy, "--replicas", "2", "--batch", "2", "--seq", "8"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["optimizer_state_bytes"].get<double>()
                            : 0.0;
  };
  const double mirrored = state("mirrored"), zero1 = state("zero1");
  EXPECT_GT(zero1, 0.0);
  // Adam's two moments of the largest parameter (the 512 × 32 position embeddings).
  const double largest = 2 * 512 * 32 * 4;
  EXPECT_LE(zero1, mirrored / 2 + largest);
  EXPECT_LT(zero1, mirrored);
}

// `bench step --task pretrain`: the masked-LM and next-sentence heads on 2 replicas, with
// create_pretraining_data.py's count of masked tokens (round(16 · 0.15) = 2 in the task's 20
// slots); an unknown task is refused before anything runs.
TEST(EndToEndBench, StepTimesThePretrainingHeads) {
  auto r = tiny_bench_step({"--task", "pretrain", "--strategy", "mirrored", "--replicas", "2",
                            "--batch", "4", "--seq", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json line = nlohmann::json::parse(r.out);
  EXPECT_EQ(line["task"], "pretrain");
  EXPECT_EQ(line["masked_lm_slots"], 20);
  EXPECT_EQ(line["masked_lm_tokens"], 2);
  EXPECT_GT(line["step_s"].get<double>(), 0.0);
  EXPECT_GT(line["comm_dense_bytes"].get<int64_t>(), 0);

  auto bad = run_bertlab({"bench", "step", "--task", "classifier"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--task must be squad or pretrain, got classifier"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

/// metrics.jsonl of `variant` under `dir`, one JSON object per line.
std::vector<nlohmann::json> metrics_lines(const fs::path& dir, const std::string& variant) {
  std::istringstream in(read_file(dir / variant / "metrics.jsonl"));
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

// strategy.overlap_backward: the dense buckets are all-reduced by hooks while backward runs,
// and the update is the single device's (and the non-overlapped strategy's), with 2 micro-batches
// per step (only the last backward starts all-reduces), sparse embedding rows left to the
// strategy, and an unused pooler that never gets a gradient.
TEST(EndToEndStrategies, OverlappedBackwardGivesTheSingleDeviceUpdate) {
  TempDir dir;
  auto r = run_bertlab({"run", data_path("experiments/overlap_backward.toml").string(),
                        "--output-dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path out = dir.path() / "overlap-backward";
  auto diff = parameter_differences(out / "comparison.csv");
  ASSERT_EQ(diff.size(), 4u);
  for (const char* v : {"mirrored-2", "mirrored-2-overlap", "sparse-allgather-2-overlap"}) {
    EXPECT_LT(diff.at(v), 1e-5) << v;
  }
  for (const char* v : {"mirrored-2-overlap", "sparse-allgather-2-overlap"}) {
    const auto lines = metrics_lines(out, v);
    ASSERT_EQ(lines.size(), 3u) << v;
    // Step 1: the bucket holding the pooler waits for a gradient that never comes, and the
    // buckets after it with it: they all start after backward, without a hang.
    EXPECT_GT(lines[0]["overlap_buckets"].get<double>(), 1.0) << v;
    EXPECT_LT(lines[0]["overlap_buckets_in_backward"].get<double>(),
              lines[0]["overlap_buckets"].get<double>())
        << v;
    // Later steps bucket only what got a dense gradient: every bucket starts during backward.
    EXPECT_GT(lines[2]["overlap_buckets_in_backward"].get<double>(), 1.0) << v;
    EXPECT_EQ(lines[2]["overlap_buckets_in_backward"].get<double>(),
              lines[2]["overlap_buckets"].get<double>())
        << v;
    // The dense payload is the same as without overlap: every dense gradient once.
    EXPECT_GT(lines[2]["comm_dense_bytes"].get<double>(), 0.0) << v;
  }
  // An element-wise sum of two ranks does not depend on the buckets: the same losses, bit for bit.
  const auto plain = metrics_lines(out, "mirrored-2");
  const auto overlapped = metrics_lines(out, "mirrored-2-overlap");
  ASSERT_EQ(plain.size(), overlapped.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i]["loss"].get<double>(), overlapped[i]["loss"].get<double>()) << i;
  }
  EXPECT_FALSE(plain.back().contains("overlap_buckets"));
  EXPECT_EQ(plain.back()["comm_dense_bytes"].get<double>(),
            metrics_lines(out, "mirrored-2-overlap").back()["comm_dense_bytes"].get<double>());
}

// With dropout on, replicas that are threads of one process draw as replicas that are processes
// do (each from its own copy of the seeded generator): the same weights after 4 steps, and the
// same again on a second run, whatever the threads' timing.
TEST(EndToEndStrategies, ThreadRanksDrawTheirDropoutAsProcessRanksDo) {
  const std::string experiment = data_path("experiments/dropout_ranks.toml").string();
  auto weights = [](const fs::path& file) {
    std::map<std::string, at::Tensor> out;
    for (auto& [name, t] : read_safetensors(file)) out[name] = t;
    return out;
  };
  auto max_difference = [](const std::map<std::string, at::Tensor>& a,
                           const std::map<std::string, at::Tensor>& b) {
    EXPECT_EQ(a.size(), b.size());
    double most = 0;
    for (const auto& [name, t] : a) {
      most = std::max(most, (t - b.at(name)).abs().max().item<double>());
    }
    return most;
  };
  TempDir first, second, launched, no_dropout;
  for (const TempDir* dir : {&first, &second}) {
    auto r = run_bertlab(
        {"run", experiment, "--variant", "threads-2", "--output-dir", dir->path().string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const auto threads = weights(first / "dropout-ranks/threads-2/model.safetensors");
  EXPECT_EQ(max_difference(threads, weights(second / "dropout-ranks/threads-2/model.safetensors")),
            0.0);
  EXPECT_EQ(without_timings(first / "dropout-ranks/threads-2/metrics.jsonl"),
            without_timings(second / "dropout-ranks/threads-2/metrics.jsonl"));

  auto r = run_bertlab({"launch", "--nproc", "2", "--", BERTLAB_EXECUTABLE, "run", experiment,
                        "--variant", "env-2", "--output-dir", launched.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(max_difference(threads, weights(launched / "dropout-ranks/env-2/model.safetensors")),
            0.0);

  // Dropout made a difference: without it the same run ends elsewhere.
  r = run_bertlab({"run", experiment, "--variant", "threads-2", "--output-dir",
                   no_dropout.path().string(), "--set", "model.hidden_dropout_prob=0.0", "--set",
                   "model.attention_probs_dropout_prob=0.0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(
      max_difference(threads, weights(no_dropout / "dropout-ranks/threads-2/model.safetensors")),
      1e-4);
}

}  // namespace
}  // namespace bertlab
