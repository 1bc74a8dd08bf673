// Experiment files: parsing, merging of variants and --set, and every class of validation error,
// against the real in-tree plugins' declarations.

#include <bertlab/error.h>
#include <gtest/gtest.h>

#include "config/experiment.h"
#include "runtime/plugin_host.h"
#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::TempDir;
using testing::write_file;

class ExperimentConfig : public ::testing::Test {
 protected:
  /// Writes an experiment whose paths point at the test fixtures, with `body` appended.
  fs::path write_experiment(const std::string& body, const std::string& name = "exp.toml") {
    const std::string header = testing::tiny_classifier_toml("name = \"t\"\nthreads = 1\n", "1e-4");
    fs::path path = dir_ / name;
    write_file(path, header + body);
    return path;
  }

  /// The error lines of resolving `path` (empty when it is valid).
  std::vector<std::string> errors_of(const fs::path& path, const ResolveOptions& options = {}) {
    try {
      ExperimentFile file = parse_experiment_file(path);
      resolve_experiment(file, testing::builtin_plugins().registry(), options);
    } catch (const ConfigError& e) {
      return e.messages();
    }
    return {};
  }

  static std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }

  TempDir dir_;
};

TEST_F(ExperimentConfig, ValidFileResolvesWithDefaults) {
  fs::path path = write_experiment("\n[train]\ntrain_batch_size = 8\n");
  ExperimentFile file = parse_experiment_file(path);
  ResolvedExperiment exp = resolve_experiment(file, testing::builtin_plugins().registry(), {});
  ASSERT_EQ(exp.variants.size(), 1u);
  const ResolvedVariant& v = exp.variants[0];
  EXPECT_EQ(v.name, "default");
  EXPECT_EQ(exp.reference, "default");
  EXPECT_EQ(v.train.get_int("train_batch_size"), 8);
  EXPECT_EQ(v.train.get_int("eval_batch_size"), 8);  // default
  EXPECT_DOUBLE_EQ(v.optimizer.options.get_float("learning_rate"), 1e-4);
  EXPECT_EQ(v.bert_config.hidden_size, 32);
  EXPECT_EQ(v.task.options.get_int("max_seq_length"), 32);
  EXPECT_NE(v.resolved_toml.find("learning_rate = 0.0001"), std::string::npos) << v.resolved_toml;
  EXPECT_NE(v.resolved_toml.find("hidden_size = 32"), std::string::npos);
}

TEST_F(ExperimentConfig, UnknownKeyNamesFileLineColumnAndSuggests) {
  fs::path path = write_experiment("learning_rat = 3e-5\n");
  auto errors = errors_of(path);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  // The typo sits on line 21, column 1 of the written file ([optimizer] section).
  EXPECT_EQ(errors[0].rfind(path.string() + ":21:1: optimizer.learning_rat: unknown key", 0), 0u)
      << errors[0];
  EXPECT_NE(errors[0].find("did you mean 'learning_rate'?"), std::string::npos) << errors[0];
}

TEST_F(ExperimentConfig, MisplacedKeyNamesItsSection) {
  fs::path path = write_experiment("train_batch_size = 8\n");
  auto errors = errors_of(path);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("'train_batch_size' belongs in [train]"), std::string::npos)
      << errors[0];
}

TEST_F(ExperimentConfig, WrongTypeOutOfRangeAndNotAllowedAreAllReported) {
  fs::path path = write_experiment(
      "warmup_proportion = \"ten percent\"\nbeta_1 = 1.5\nclip_norm_mode = \"sideways\"\n"
      "\n[train]\ntrain_batch_size = 0\n");
  auto errors = errors_of(path);
  const std::string all = joined(errors);
  ASSERT_EQ(errors.size(), 4u) << all;
  EXPECT_NE(all.find(":21:21: optimizer.warmup_proportion: must be a number, got string "
                     "\"ten percent\""),
            std::string::npos)
      << all;
  EXPECT_NE(all.find(":22:10: optimizer.beta_1: must be in [0, 1"), std::string::npos) << all;
  EXPECT_NE(all.find("optimizer.clip_norm_mode: must be one of coalesced|uncoalesced, got "
                     "\"sideways\""),
            std::string::npos)
      << all;
  EXPECT_NE(all.find(":26:20: train.train_batch_size: must be >= 1, got 0"), std::string::npos)
      << all;
}

// NCCL needs one CUDA device per rank, so ranks that are processes on CUDA devices; any other
// combination is refused before work starts, as is NCCL in a build without it.
TEST_F(ExperimentConfig, NcclBackendNeedsCudaProcessRanks) {
  fs::path path = write_experiment(
      "\n[[variant]]\nname = \"cpu-nccl\"\nstrategy = { plugin = "
      "\"mirrored\", replicas = 2, backend = \"nccl\" }\n");
  auto errors = errors_of(path);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("strategy.backend: 'nccl' needs CUDA ranks that are processes "
                           "(device = \"cuda\", launcher = \"env\"); this variant has device = "
                           "\"cpu\", launcher = \"threads\""),
            std::string::npos)
      << errors[0];
  path = write_experiment(
      "\n[[variant]]\nname = \"bad\"\nstrategy = { plugin = "
      "\"mirrored\", replicas = 2, backend = \"mpi\" }\n");
  errors = errors_of(path);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("strategy.backend: must be one of auto|gloo|nccl, got \"mpi\""),
            std::string::npos)
      << errors[0];
}

TEST_F(ExperimentConfig, MissingRequiredKeyAndMissingFile) {
  TempDir other;
  write_file(other / "exp.toml", R"([experiment]
name = "t"
[model]
bert_config_file = "no_such_config.json"
[task]
plugin = "classifier"
data_dir = "."
[strategy]
plugin = "single"
[optimizer]
plugin = "adam_weight_decay"
)");
  auto errors = errors_of(other / "exp.toml");
  const std::string all = joined(errors);
  EXPECT_NE(all.find(":4:20: model.bert_config_file: file not found: " +
                     (other.path() / "no_such_config.json").string()),
            std::string::npos)
      << all;
  EXPECT_NE(all.find(":3:1: model.vocab_file: missing required key"), std::string::npos) << all;
  EXPECT_NE(all.find(":5:1: task.task_name: missing required key"), std::string::npos) << all;
}

TEST_F(ExperimentConfig, UnknownPluginListsTheKnownOnes) {
  fs::path path = write_experiment("");
  std::string text = testing::read_file(path);
  text.replace(text.find("plugin = \"single\""), 17, "plugin = \"singel\"");
  write_file(path, text);
  auto errors = errors_of(path);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("strategy.plugin: unknown strategy plugin 'singel'; did you mean "
                           "'single'?; known strategy plugins: local_sgd, mirrored, powersgd, "
                           "single, sparse_allgather"),
            std::string::npos)
      << errors[0];
}

TEST_F(ExperimentConfig, VariantsDeepMergeOverTheBase) {
  fs::path path = write_experiment(R"(
[train]
train_batch_size = 8

[[variant]]
name = "a"

[[variant]]
name = "b"
optimizer.learning_rate = 5e-4
model = { sparse_embeddings = true, hidden_size = 64 }

[compare]
reference = "b"
)");
  ExperimentFile file = parse_experiment_file(path);
  ResolvedExperiment exp = resolve_experiment(file, testing::builtin_plugins().registry(), {});
  ASSERT_EQ(exp.variants.size(), 2u);
  EXPECT_EQ(exp.reference, "b");
  EXPECT_DOUBLE_EQ(exp.variants[0].optimizer.options.get_float("learning_rate"), 1e-4);
  EXPECT_DOUBLE_EQ(exp.variants[1].optimizer.options.get_float("learning_rate"), 5e-4);
  EXPECT_FALSE(exp.variants[0].model.get_bool("sparse_embeddings"));
  EXPECT_TRUE(exp.variants[1].model.get_bool("sparse_embeddings"));
  EXPECT_EQ(exp.variants[1].bert_config.hidden_size, 64);
  EXPECT_EQ(exp.variants[1].train.get_int("train_batch_size"), 8);  // from the base
}

TEST_F(ExperimentConfig, SetOverridesEveryVariantAndNamesTheArgument) {
  fs::path path = write_experiment("\n[[variant]]\nname = \"a\"\noptimizer.learning_rate = 2e-4\n");
  ExperimentFile file = parse_experiment_file(path);
  ResolveOptions options;
  options.overrides.push_back(parse_set_argument("optimizer.learning_rate=7e-5"));
  options.overrides.push_back(parse_set_argument("train.log_every_steps=3"));
  ResolvedExperiment exp = resolve_experiment(file, testing::builtin_plugins().registry(), options);
  EXPECT_DOUBLE_EQ(exp.variants[0].optimizer.options.get_float("learning_rate"), 7e-5);
  EXPECT_EQ(exp.variants[0].train.get_int("log_every_steps"), 3);

  ResolveOptions bad;
  bad.overrides.push_back(parse_set_argument("train.log_every_steps=often"));
  auto errors = errors_of(path, bad);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_EQ(errors[0],
            "--set 'train.log_every_steps=often': train.log_every_steps: must be an integer, got "
            "string \"often\"");
  EXPECT_THROW(parse_set_argument("learning_rate=1"), ConfigError);
  EXPECT_THROW(parse_set_argument("optimiser.learning_rate=1"), ConfigError);
}

TEST_F(ExperimentConfig, BaseKeyUndeclaredByAVariantsPluginIsAnError) {
  // clip_norm belongs to adam_weight_decay; a variant switching the strategy keeps the base
  // strategy keys, and a key the new plugin does not declare is an error there.
  fs::path path = write_experiment(R"(
[[variant]]
name = "one"

[[variant]]
name = "other"
strategy = { plugin = "single", clip_norm = 2.0 }
)");
  auto errors = errors_of(path);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("strategy.clip_norm: unknown key for strategy 'single'"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("(variant other)"), std::string::npos) << errors[0];
}

TEST_F(ExperimentConfig, DuplicateVariantAndUnknownReference) {
  fs::path path = write_experiment("\n[[variant]]\nname = \"a\"\n\n[[variant]]\nname = \"a\"\n");
  auto errors = errors_of(path);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("duplicate variant name 'a'"), std::string::npos) << errors[0];

  fs::path path2 =
      write_experiment("\n[[variant]]\nname = \"a\"\n[compare]\nreference = \"b\"\n", "exp2.toml");
  auto errors2 = errors_of(path2);
  ASSERT_EQ(errors2.size(), 1u) << joined(errors2);
  EXPECT_NE(errors2[0].find("compare.reference: no variant named 'b'"), std::string::npos);
}

// Names become folders under runs/: a name that would leave that folder, or name two, is refused
// where it is written (before this, `name = "../../escape"` wrote two folders above runs/).
TEST_F(ExperimentConfig, NamesThatAreNotOneSafeFolderAreRefusedWithTheirPosition) {
  fs::path path = write_experiment("\n[[variant]]\nname = \"../x\"\n");
  auto errors = errors_of(path);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find(path.string() + ":23:8: variant.name: '../x' has '/'"),
            std::string::npos)
      << errors[0];
  fs::path dots = write_experiment("\n[[variant]]\nname = \"..\"\n", "dots.toml");
  EXPECT_NE(joined(errors_of(dots)).find("variant.name: '..' is not a folder name of its own"),
            std::string::npos);
  // The experiment's own name, from the file or from --set.
  std::string text = testing::read_file(path);
  text.replace(text.find("name = \"t\""), 10, "name = \"a/b\"");
  text.replace(text.find("\"../x\""), 6, "\"ok=1,lr+2.5e-05\"");  // a sweep's kind of name
  const fs::path exp = dir_ / "slash.toml";
  write_file(exp, text);
  errors = errors_of(exp);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find(exp.string() + ":2:8: experiment.name: 'a/b' has '/'"),
            std::string::npos)
      << errors[0];
  ResolveOptions empty_name;
  empty_name.overrides.push_back(parse_set_argument("experiment.name=\"\""));
  const fs::path clean = write_experiment("", "clean.toml");
  EXPECT_NE(joined(errors_of(clean, empty_name)).find("experiment.name: must not be empty"),
            std::string::npos)
      << joined(errors_of(clean, empty_name));
}

// [experiment] seeds: every variant once per seed, each run its own seed and folder; bad lists,
// seeds with repeats, and seeds set outside the file's [experiment] are refused where written.
TEST_F(ExperimentConfig, SeedsExpandEveryVariantAndBadListsAreRefused) {
  fs::path path = write_experiment("\n[[variant]]\nname = \"a\"\n\n[[variant]]\nname = \"b\"\n");
  std::string text = testing::read_file(path);
  text.replace(text.find("threads = 1"), 11, "threads = 1\nseeds = [3, 1]");
  const fs::path seeded = dir_ / "seeded.toml";
  write_file(seeded, text);
  ResolvedExperiment e =
      resolve_experiment(parse_experiment_file(seeded), testing::builtin_plugins().registry(), {});
  ASSERT_EQ(e.variants.size(), 4u);
  EXPECT_EQ(e.seeds, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(e.variants[1].name, "a");
  EXPECT_EQ(e.variants[1].experiment.get_int("seed"), 1);
  EXPECT_EQ(e.variants[1].run_folder(), fs::path("a") / "seed-1");
  EXPECT_NE(e.variants[1].resolved_toml.find("seed = 1"), std::string::npos);
  EXPECT_EQ(e.variants[2].run_folder(), fs::path("b") / "seed-3");
  // One seed: the usual folder, that seed.
  std::string one = text;
  one.replace(one.find("seeds = [3, 1]"), 14, "seeds = [4]");
  write_file(seeded, one);
  e = resolve_experiment(parse_experiment_file(seeded), testing::builtin_plugins().registry(), {});
  ASSERT_EQ(e.variants.size(), 2u);
  EXPECT_EQ(e.variants[0].run_folder(), fs::path("a"));
  EXPECT_EQ(e.variants[0].experiment.get_int("seed"), 4);
  // repeats = 2 from seed 12345.
  ResolveOptions repeats;
  repeats.overrides.push_back(parse_set_argument("experiment.repeats=2"));
  e = resolve_experiment(parse_experiment_file(path), testing::builtin_plugins().registry(),
                         repeats);
  ASSERT_EQ(e.variants.size(), 4u);
  EXPECT_EQ(e.variants[1].run_folder(), fs::path("a") / "seed-12346");
  // Refused: a repeated seed and a string; seeds with repeats; seeds in a variant.
  std::string bad = text;
  bad.replace(bad.find("seeds = [3, 1]"), 14, "seeds = [3, 3, \"x\"]");
  write_file(seeded, bad);
  auto errors = errors_of(seeded);
  EXPECT_NE(
      joined(errors).find(seeded.string() + ":4:13: experiment.seeds: seed 3 is listed twice"),
      std::string::npos)
      << joined(errors);
  EXPECT_NE(joined(errors).find("every seed must be an integer >= 0, got string"),
            std::string::npos);
  write_file(seeded, text);
  EXPECT_NE(joined(errors_of(seeded, repeats)).find("set seeds or repeats, not both"),
            std::string::npos);
  const fs::path in_variant =
      write_experiment("\n[[variant]]\nname = \"a\"\nexperiment.seeds = [1]\n", "v.toml");
  EXPECT_NE(joined(errors_of(in_variant)).find("experiment.seeds: the seeds are listed once"),
            std::string::npos)
      << joined(errors_of(in_variant));
}

// [sweep]: a grid of 2 × 2 and a zip of 2, alone and with written variants; the generated
// variants validated like written ones, errors at the sweep's lines.
TEST_F(ExperimentConfig, SweepsGenerateNamedVariantsValidatedLikeWrittenOnes) {
  const std::string grid =
      "\n[sweep]\n[sweep.optimizer]\nlearning_rate = [5e-5, 1e-4]\n[sweep.train]\n"
      "train_batch_size = [16, 32]\n";
  fs::path path = write_experiment(grid);
  const auto& registry = testing::builtin_plugins().registry();
  ResolvedExperiment e = resolve_experiment(parse_experiment_file(path), registry, {});
  std::vector<std::string> names;
  for (const auto& v : e.variants) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"learning_rate=5e-05,train_batch_size=16",
                                             "learning_rate=5e-05,train_batch_size=32",
                                             "learning_rate=0.0001,train_batch_size=16",
                                             "learning_rate=0.0001,train_batch_size=32"}));
  EXPECT_DOUBLE_EQ(e.variants[2].optimizer.options.get_float("learning_rate"), 1e-4);
  EXPECT_EQ(e.variants[2].train.get_int("train_batch_size"), 16);
  // zip, applied to each written variant.
  fs::path zip = write_experiment(
      "\n[[variant]]\nname = \"adam\"\n\n[[variant]]\nname = \"lamb\"\noptimizer.plugin = "
      "\"lamb\"\n\n[sweep]\nmode = \"zip\"\n[sweep.optimizer]\nlearning_rate = [1e-4, 2e-4]\n"
      "[sweep.train]\ntrain_batch_size = [8, 16]\n",
      "zip.toml");
  e = resolve_experiment(parse_experiment_file(zip), registry, {});
  ASSERT_EQ(e.variants.size(), 4u);
  EXPECT_EQ(e.variants[3].name, "lamb,learning_rate=0.0002,train_batch_size=16");
  EXPECT_EQ(e.variants[3].optimizer.plugin, "lamb");
  EXPECT_EQ(e.variants[3].train.get_int("train_batch_size"), 16);
  // A key no plugin declares: FILE:LINE:COL of the sweep's key, once.
  fs::path typo =
      write_experiment("\n[sweep]\n[sweep.optimizer]\nlearning_rat = [5e-5, 1e-4]\n", "typo.toml");
  auto errors = errors_of(typo);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find(typo.string() + ":24:1: optimizer.learning_rat: unknown key"),
            std::string::npos)
      << errors[0];
  // A value out of range: the value's own position in the list.
  fs::path range =
      write_experiment("\n[sweep]\n[sweep.train]\ntrain_batch_size = [16, -1]\n", "range.toml");
  EXPECT_NE(joined(errors_of(range))
                .find(range.string() + ":24:25: train.train_batch_size: must be >= 1, got -1"),
            std::string::npos)
      << joined(errors_of(range));
  // zip lists of different lengths; more runs than max_runs.
  fs::path uneven = write_experiment(
      "\n[sweep]\nmode = \"zip\"\n[sweep.optimizer]\nlearning_rate = [1e-4, 2e-4]\n"
      "[sweep.train]\ntrain_batch_size = [8]\n",
      "uneven.toml");
  EXPECT_NE(joined(errors_of(uneven)).find("1 values, but sweep.optimizer.learning_rate has 2"),
            std::string::npos)
      << joined(errors_of(uneven));
  std::string many = grid;
  many.insert(many.find("[sweep.optimizer]"), "max_runs = 3\n");
  fs::path capped = write_experiment(many, "capped.toml");
  EXPECT_NE(joined(errors_of(capped))
                .find("sweep: 4 runs (4 variants × 1 seed(s)) is more than "
                      "max_runs = 3"),
            std::string::npos)
      << joined(errors_of(capped));
}

TEST_F(ExperimentConfig, SyntaxErrorReportsTomlPosition) {
  fs::path path = dir_ / "broken.toml";
  write_file(path, "[experiment]\nname = \"x\nseed = 1\n");
  try {
    parse_experiment_file(path);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.messages().size(), 1u);
    EXPECT_EQ(e.messages()[0].rfind(path.string() + ":2:", 0), 0u) << e.messages()[0];
    EXPECT_NE(e.messages()[0].find("TOML syntax error"), std::string::npos);
  }
}

TEST_F(ExperimentConfig, UnknownSectionSuggestsTheClosest) {
  fs::path path = write_experiment("\n[trian]\ntrain_batch_size = 8\n");
  auto errors = errors_of(path);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("trian: unknown section; did you mean 'train'?"), std::string::npos)
      << errors[0];
}

TEST_F(ExperimentConfig, VocabularyMustFitTheEmbeddingTable) {
  fs::path ok = write_experiment("", "ok.toml");
  ResolveOptions options;
  options.overrides.push_back(parse_set_argument("model.vocab_size=100"));
  auto errors = errors_of(ok, options);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("model.vocab_file: "), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("has 30522 tokens but bert_config vocab_size is 100"), std::string::npos)
      << errors[0];
}

TEST(ClosestMatch, SuggestsOnlyNearKeys) {
  EXPECT_EQ(closest_match("learning_rat", {"learning_rate", "warmup_proportion"}), "learning_rate");
  EXPECT_EQ(closest_match("batch_size", {"train_batch_size", "eval_batch_size"}),
            "train_batch_size");
  EXPECT_FALSE(closest_match("zzzzzz", {"learning_rate", "seed"}).has_value());
}

}  // namespace
}  // namespace bertlab
