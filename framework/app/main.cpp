// The `bertlab` executable: parse the command line → load plugins → validate → run.
// Only this file turns exceptions into messages and exit codes: 2 for configuration and plugin
// errors, 1 for anything else.

#include <bertlab/error.h>
#include <bertlab/log.h>
#include <bertlab/text/tokenizer.h>
#include <torch/csrc/api/include/torch/version.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>

#include "commands/bench_comm.h"
#include "commands/bench_gemm.h"
#include "commands/bench_step.h"
#include "commands/bench_tokenize.h"
#include "commands/describe.h"
#include "commands/gradcheck.h"
#include "commands/inspect.h"
#include "commands/launch.h"
#include "commands/tokenize_command.h"
#include "config/experiment.h"
#include "config/host_options.h"
#include "report/compare.h"
#include "runtime/plugin_host.h"
#include "runtime/threads.h"
#include "train/runner.h"

namespace fs = std::filesystem;

namespace bertlab {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitConfig = 2;

struct CommonOptions {
  std::vector<std::string> plugin_dirs;
  bool allow_insecure_plugins = false;
};

void load_plugins(PluginHost& host, const CommonOptions& common) {
  std::vector<fs::path> extra(common.plugin_dirs.begin(), common.plugin_dirs.end());
  host.allow_insecure(common.allow_insecure_plugins);
  host.load_directories(PluginHost::search_path(extra));
}

void log_versions(const PluginHost& host) {
  log_info("bertlab", "bertlab {}, libtorch {}, {}", BERTLAB_VERSION, TORCH_VERSION,
           blas_description());
  for (const auto& p : host.plugins()) {
    log_info("plugin", "{} {} from {}", p.name, p.version, p.file.string());
  }
}

ResolvedExperiment load_experiment(const PluginHost& host, const std::string& file,
                                   const std::vector<std::string>& sets,
                                   const std::vector<std::string>& variants,
                                   const std::string& output_dir) {
  ExperimentFile parsed = parse_experiment_file(file);
  ResolveOptions options;
  std::vector<std::string> errors;
  for (const auto& s : sets) {
    try {
      options.overrides.push_back(parse_set_argument(s));
    } catch (const ConfigError& e) {
      errors.insert(errors.end(), e.messages().begin(), e.messages().end());
    }
  }
  if (!errors.empty()) throw ConfigError(errors);
  options.selected_variants = variants;
  if (!output_dir.empty()) options.output_dir = fs::path(output_dir);
  return resolve_experiment(parsed, host.registry(), options);
}

// An exception a plugin throws may have its type's code in the plugin, which goes when the
// PluginHost unloads it: rethrow a copy made by this executable while the host still holds it.
[[noreturn]] void rethrow_as_host_copy() {
  try {
    throw;
  } catch (const ConfigError& e) {
    throw ConfigError(e.messages());
  } catch (const PluginError& e) {
    throw PluginError(e.what());
  } catch (const DataError& e) {
    throw DataError(e.what());
  } catch (const Interrupted& e) {
    throw Interrupted(e.what(), e.signal());
  } catch (const Error& e) {
    throw Error(e.what());
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
}

// Runs `body` with a fresh PluginHost; what it throws reaches the caller as a host copy.
template <typename Body>
int with_plugin_host(Body&& body) {
  PluginHost host;
  try {
    return body(host);
  } catch (...) {
    rethrow_as_host_copy();
  }
}

int cmd_run(const CommonOptions& common, const std::string& file,
            const std::vector<std::string>& sets, const std::vector<std::string>& variants,
            const std::string& output_dir) {
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, common);
    ResolvedExperiment experiment = load_experiment(host, file, sets, variants, output_dir);
    log_versions(host);
    log_info("config", "{}: experiment '{}', {} variant(s): {}", file, experiment.name,
             experiment.variants.size(), [&] {
               std::string names;
               for (const auto& v : experiment.variants)
                 names += (names.empty() ? "" : ", ") + v.name;
               return names;
             }());
    std::string table = run_experiment(experiment, host);
    if (table.empty()) return 0;  // a rank other than 0 of a launched run
    const fs::path dir = experiment.output_dir / experiment.name;
    std::cout << table << "\nComparison written to " << (dir / "comparison.md").string() << ", "
              << (dir / "comparison.csv").string() << " and " << (dir / "report.html").string()
              << "\n";
    return 0;
  });
}

int cmd_validate(const CommonOptions& common, const std::string& file,
                 const std::vector<std::string>& sets, const std::vector<std::string>& variants) {
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, common);
    ResolvedExperiment experiment = load_experiment(host, file, sets, variants, "");
    for (const auto& v : experiment.variants) {
      std::cout << v.resolved_toml << "\n";
    }
    std::cout << "# " << file << ": " << experiment.variants.size()
              << " variant(s) valid; outputs would go to "
              << (experiment.output_dir / experiment.name).string() << "\n";
    return 0;
  });
}

int cmd_gradcheck(const CommonOptions& common, const std::string& file,
                  const std::vector<std::string>& sets, const std::vector<std::string>& variants,
                  const std::string& output_dir, const GradcheckOptions& options) {
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, common);
    ResolvedExperiment experiment = load_experiment(host, file, sets, variants, output_dir);
    log_versions(host);
    return run_gradcheck(experiment, options);
  });
}

struct DescribeRequest {
  std::string name;             ///< --describe NAME
  bool all = false;             ///< --all
  std::string format = "text";  ///< --format text|markdown
};

int cmd_plugins(const CommonOptions& common, const DescribeRequest& describe) {
  return with_plugin_host([&](PluginHost& host) -> int {
    const DescribeFormat format = parse_describe_format(describe.format);
    load_plugins(host, common);
    const auto& registry = host.registry();
    if (describe.all) {
      describe_all(registry, format, std::cout);
      return 0;
    }
    if (describe.name.empty()) {
      std::cout << fmt::format("{:<10} {:<20} {:<8} {:<40} {}\n", "KIND", "NAME", "VERSION",
                               "DESCRIPTION", "FILE");
      for (const Component* c : registry.all()) {
        std::cout << fmt::format("{:<10} {:<20} {:<8} {:<40} {}\n", to_string(c->kind),
                                 c->spec.name, c->origin.plugin_version, c->spec.description,
                                 c->origin.file.string());
      }
      for (const auto& t : registry.tools()) {
        std::cout << fmt::format("{:<10} {:<20} {:<8} {:<40} {}\n", "tool", t.group + " " + t.name,
                                 t.origin.plugin_version, t.description, t.origin.file.string());
      }
      return 0;
    }
    auto found = registry.find_any(describe.name);
    if (found.empty()) {
      std::vector<std::string> names;
      for (const Component* c : registry.all()) names.push_back(c->spec.name);
      auto close = closest_match(describe.name, names);
      throw PluginError(fmt::format(
          "--describe {}: no component of that name{}; known: {}", describe.name,
          close ? fmt::format("; did you mean '{}'?", *close) : "", fmt::join(names, ", ")));
    }
    describe_components(found, format, std::cout);
    return 0;
  });
}

int cmd_tokenize(const std::string& vocab, bool no_lower_case, bool ids) {
  FullTokenizer tokenizer(vocab, !no_lower_case);
  try {
    return run_tokenize_command(tokenizer, ids, std::cin, std::cout);
  } catch (const DataError& e) {
    throw DataError(fmt::format("stdin: {}", e.what()));
  }
}

int run_tool(const CommonOptions& common, const std::string& group,
             const std::vector<std::string>& args) {
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, common);
    const auto& tools = host.registry().tools();
    if (args.empty()) {
      throw ConfigError(fmt::format("bertlab {}: name a tool", group));
    }
    const Tool* tool = host.registry().find_tool(group, args.front());
    if (tool == nullptr) {
      std::vector<std::string> names;
      names.reserve(tools.size());
      for (const auto& t : tools) names.push_back(t.group + " " + t.name);
      throw ConfigError(
          fmt::format("bertlab {} {}: no such tool; tools: {}", group, args.front(),
                      names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
    return tool->main(std::vector<std::string>(args.begin() + 1, args.end()));
  });
}

/// docs/cli.md: every command's help, generated from the same definitions that parse the
/// command line (`bertlab --cli-reference > docs/cli.md`; a test fails when the file is stale).
void print_cli_reference(CLI::App& app, std::ostream& out) {
  out << "# Command-line reference\n\n"
      << "Generated by `bertlab --cli-reference > docs/cli.md` from the definitions that parse "
         "the command line; a test fails when this file falls behind them. Exit codes, log "
         "levels and examples: [commands.md](commands.md).\n\n```\n"
      << app.help() << "```\n";
  std::function<void(CLI::App*, const std::string&)> walk = [&](CLI::App* sub,
                                                                const std::string& path) {
    for (CLI::App* child : sub->get_subcommands({})) {
      const std::string name = path + " " + child->get_name();
      out << "\n## " << name << "\n\n```\n" << child->help() << "```\n";
      walk(child, name);
    }
  };
  walk(&app, "bertlab");
}

/// The help's list of the tools the plugins found contribute (`bertlab GROUP TOOL`).
std::string plugin_tools_footer(const CommonOptions& common) {
  try {
    std::string out = "\nPlugin tools (bertlab GROUP TOOL --help):\n";
    with_plugin_host([&](PluginHost& host) -> int {
      load_plugins(host, common);
      for (const auto& t : host.registry().tools()) {
        out += fmt::format("  {:<28}{}\n", t.group + " " + t.name, t.description);
      }
      return 0;
    });
    return out;
  } catch (const std::exception& e) {
    return fmt::format("\nPlugin tools: none listed ({})\n", error_text(e));
  }
}

int dispatch(int argc, char** argv) {
  CLI::App app{"bertlab: BERT experiments on LibTorch, wired from TOML by plugins", "bertlab"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("bertlab ") + BERTLAB_VERSION);
  // Taken out of argv by main() before parsing (any position before `--`); listed for --help.
  bool verbose = false;
  app.add_flag("--verbose", verbose,
               "error messages keep libtorch's C++ stack traces (as BERTLAB_DEBUG=1)");
  CommonOptions common;

  auto add_plugin_dir = [&](CLI::App* sub) {
    sub->add_option("--plugin-dir", common.plugin_dirs,
                    "extra folder of plugin libraries (repeatable; BERTLAB_PLUGIN_PATH too)");
    sub->add_flag("--allow-insecure-plugins", common.allow_insecure_plugins,
                  "load plugin files or folders that every user may write");
  };

  std::string file;
  std::vector<std::string> sets, variants;
  std::string output_dir;
  CLI::App* run = app.add_subcommand("run", "run an experiment's variants and compare them");
  run->add_option("experiment", file, "experiment TOML file")->required();
  run->add_option("--variant", variants, "run only this variant (repeatable)");
  run->add_option("--set", sets, "override SECTION.KEY=VALUE (repeatable)");
  run->add_option("--output-dir", output_dir, "results folder (default [experiment] output_dir)");
  bool resume = false;
  run->add_flag("--resume", resume,
                "continue each variant from its newest checkpoint (as --set train.resume=true)");
  add_plugin_dir(run);

  CLI::App* validate = app.add_subcommand("validate",
                                          "check an experiment file; print each "
                                          "resolved variant");
  validate->add_option("experiment", file, "experiment TOML file")->required();
  validate->add_option("--variant", variants, "check only this variant (repeatable)");
  validate->add_option("--set", sets, "override SECTION.KEY=VALUE (repeatable)");
  add_plugin_dir(validate);

  int64_t steps = 3;
  std::string save_baseline, baseline;
  CLI::App* gradcheck = app.add_subcommand(
      "gradcheck", "compare every variant's gradients and parameters with the reference's");
  gradcheck->add_option("experiment", file, "experiment TOML file")->required();
  gradcheck->add_option("--steps", steps, "optimizer steps per variant (default 3)");
  gradcheck->add_option("--variant", variants, "check only this variant (repeatable)");
  gradcheck->add_option("--set", sets, "override SECTION.KEY=VALUE (repeatable)");
  gradcheck->add_option("--output-dir", output_dir, "folder for gradcheck.md and gradcheck.json");
  gradcheck->add_option("--save-baseline", save_baseline,
                        "write per-step gradient norms, losses and parameter checksums here");
  gradcheck->add_option("--baseline", baseline, "fail when the numbers differ from this file");
  add_plugin_dir(gradcheck);

  CLI::App* bench = app.add_subcommand("bench", "measure this machine");
  bench->require_subcommand(1);
  CommBenchOptions comm_bench;
  CLI::App* bench_comm_cmd =
      bench->add_subcommand("comm", "all-reduce and all-gather bandwidth (Gloo, thread ranks)");
  bench_comm_cmd->add_option("--world", comm_bench.world, "ranks (default 2)");
  bench_comm_cmd->add_option("--mb", comm_bench.mb, "MiB per rank (default 64)");
  bench_comm_cmd->add_option("--iters", comm_bench.iterations, "timed repetitions (default 5)");
  StepBenchOptions step_bench;
  CLI::App* bench_step_cmd = bench->add_subcommand(
      "step", "a BERT training step (SQuAD span head, random ids): time by phase, tokens/s, RSS");
  bench_step_cmd->add_option("--hidden-size", step_bench.hidden_size, "default 768");
  bench_step_cmd->add_option("--num-hidden-layers", step_bench.num_hidden_layers, "default 12");
  bench_step_cmd->add_option("--num-attention-heads", step_bench.num_attention_heads, "default 12");
  bench_step_cmd->add_option("--intermediate-size", step_bench.intermediate_size, "default 3072");
  bench_step_cmd->add_option("--vocab-size", step_bench.vocab_size, "default 30522");
  bench_step_cmd->add_option("--batch", step_bench.batch, "global batch (default 8)");
  bench_step_cmd->add_option("--seq", step_bench.seq, "tokens per example (default 128)");
  bench_step_cmd->add_option("--steps", step_bench.steps,
                             "timed steps after a warm-up (default 5)");
  bench_step_cmd->add_option("--threads", step_bench.threads,
                             "libtorch and OpenBLAS threads (default 1)");
  bench_step_cmd->add_option("--strategy", step_bench.strategy, "single|mirrored|sparse_allgather");
  bench_step_cmd->add_option("--replicas", step_bench.replicas, "thread ranks (default 1)");
  bench_step_cmd->add_flag("--sparse-embeddings", step_bench.sparse_embeddings,
                           "word-embedding gradient as sparse rows");
  bench_step_cmd->add_flag("--overlap-backward", step_bench.overlap_backward,
                           "the strategy's overlap_backward: all-reduce while backward runs");
  bench_step_cmd->add_option("--bucket-mb", step_bench.bucket_mb,
                             "the strategy's all-reduce bucket MiB (default: its default)");
  bench_step_cmd->add_option("--optimizer", step_bench.optimizer, "default adam_weight_decay");
  bench_step_cmd->add_option("--device", step_bench.device, "cpu (default), cuda or cuda:N");
  bench_step_cmd->add_option("--precision", step_bench.precision,
                             "fp32 (default), bf16 or fp16 (CUDA): autocast of the forward pass");
  bench_step_cmd->add_flag("--tf32", step_bench.tf32, "TF32 fp32 matrix products on CUDA");
  bench_step_cmd->add_option("--dropout", step_bench.dropout,
                             "hidden and attention dropout (default 0.1, as BERT)");
  bench_step_cmd->add_option("--dropout-rng", step_bench.dropout_rng,
                             "per_example (default), replica, or both: one line per mode");
  TokenizeBenchOptions tokenize_bench;
  CLI::App* bench_tokenize_cmd =
      bench->add_subcommand("tokenize", "WordPiece tokenization speed (MB/s, tokens/s)");
  bench_tokenize_cmd->add_option("--vocab", tokenize_bench.vocab_file, "vocab.txt")->required();
  bench_tokenize_cmd->add_option("--input", tokenize_bench.input, "a text file")->required();
  bench_tokenize_cmd->add_flag("--no-lower-case{false}", tokenize_bench.do_lower_case,
                               "keep case (cased models)");
  bench_tokenize_cmd->add_option("--threads", tokenize_bench.threads,
                                 "threads of the parallel run (default: one per core)");
  bench_tokenize_cmd->add_option(
      "--repeats", tokenize_bench.repeats,
      "timed passes over the input; the fastest is reported (default 3)");
  GemmBenchOptions gemm_bench;
  CLI::App* bench_gemm_cmd =
      bench->add_subcommand("gemm", "float32 matrix-product rate (GFLOP/s) at a thread count");
  bench_gemm_cmd->add_option("--size", gemm_bench.size, "square matrices (default 1024)");
  bench_gemm_cmd->add_option("--threads", gemm_bench.threads, "default 1");
  bench_gemm_cmd->add_option("--iters", gemm_bench.iterations, "timed products (default 10)");

  std::string checkpoint;
  bool stats = false;
  CLI::App* inspect = app.add_subcommand("inspect", "list the tensors of a checkpoint");
  inspect
      ->add_option("checkpoint", checkpoint,
                   "TF checkpoint (bert_model.ckpt), pytorch_model.bin or .safetensors")
      ->required();
  inspect->add_flag("--stats", stats, "add mean, std, min and max of each tensor");

  ConvertOptions convert_options;
  std::string convert_config;
  CLI::App* convert = app.add_subcommand("convert", "write any checkpoint as safetensors");
  convert
      ->add_option("--from", convert_options.from,
                   "TF checkpoint (bert_model.ckpt), pytorch_model.bin or .safetensors")
      ->required();
  convert->add_option("--to", convert_options.to, "OUT.safetensors")->required();
  convert->add_option("--names", convert_options.names,
                      "hf: Hugging Face / bertlab names (default); google: TF names and layouts");
  convert->add_option("--bert-config", convert_config,
                      "bert_config.json for the metadata (default: the one beside --from)");

  CompareOptions compare_options;
  std::vector<std::string> compare_runs_args;
  std::string compare_output;
  CLI::App* compare = app.add_subcommand(
      "compare", "rebuild comparison.md/.csv, plots/ and report.html from finished runs");
  compare
      ->add_option("runs", compare_runs_args,
                   "run folders: runs/EXPERIMENT or runs/EXPERIMENT/VARIANT (several, also of "
                   "different experiments)")
      ->required();
  compare->add_option("--output", compare_output,
                      "folder for the comparison (default: the experiment folder of the runs)");
  compare->add_option("--reference", compare_options.reference,
                      "reference variant for the parameter difference (default: [compare] "
                      "reference, else the first)");

  DescribeRequest describe;
  CLI::App* plugins = app.add_subcommand("plugins", "list the components of every plugin");
  CLI::Option* describe_flag =
      plugins->add_option("--describe", describe.name, "print the options of the component NAME")
          ->expected(0, 1);
  plugins->add_flag("--all", describe.all,
                    "with --describe (no NAME): every component's options and every tool");
  plugins->add_option("--format", describe.format,
                      "text (default) or markdown (docs/plugin-reference.md)");
  add_plugin_dir(plugins);

  std::string vocab;
  bool no_lower_case = false, ids = false;
  CLI::App* tokenize = app.add_subcommand("tokenize", "tokenize stdin lines as Google BERT does");
  tokenize->add_option("--vocab", vocab, "vocab.txt")->required();
  tokenize->add_flag("--no-lower-case", no_lower_case, "keep case and accents");
  tokenize->add_flag("--ids", ids, "print token ids instead of tokens");

  // `bertlab launch [--nproc N] [--master-port P] -- COMMAND...`: everything after `--` is the
  // ranks' command line, passed through untouched.
  LaunchOptions launch_options;
  CLI::App* launch = app.add_subcommand(
      "launch", "start N local processes as the ranks of one run, with torchrun's variables");
  launch->add_option("--nproc", launch_options.nproc, "processes (ranks) to start")
      ->capture_default_str();
  launch->add_option("--master-port", launch_options.master_port,
                     "rank 0's store port (MASTER_PORT); 0: a free one");
  launch->add_option("command", launch_options.command,
                     "after --: the ranks' program and arguments (bertlab: this executable)");

  // `bertlab --help` lists the plugins' tools too.
  const bool reference = argc == 2 && std::strcmp(argv[1], "--cli-reference") == 0;
  if (argc < 2 || reference || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    app.footer(plugin_tools_footer(common));
  }
  if (reference) {
    print_cli_reference(app, std::cout);
    return 0;
  }

  // `bertlab GROUP TOOL ...`: tools contributed by plugins; `bertlab bench NAME` too, for a
  // NAME that is not one of the built-in benchmarks.
  if (argc >= 2 && argv[1][0] != '-') {
    const std::string first = argv[1];
    bool builtin = false;
    for (const auto* sub : app.get_subcommands({})) builtin |= sub->get_name() == first;
    if (first == "bench" && argc >= 3 && argv[2][0] != '-') {
      builtin = false;
      for (const auto* sub : bench->get_subcommands({})) builtin |= sub->get_name() == argv[2];
    }
    if (!builtin) {
      std::vector<std::string> rest;
      for (int i = 2; i < argc; ++i) {
        if (std::strcmp(argv[i], "--plugin-dir") == 0 && i + 1 < argc) {
          common.plugin_dirs.push_back(argv[++i]);
        } else if (std::strcmp(argv[i], "--allow-insecure-plugins") == 0) {
          common.allow_insecure_plugins = true;
        } else {
          rest.push_back(argv[i]);
        }
      }
      return run_tool(common, first, rest);
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitConfig;
  }
  if (run->parsed()) {
    if (resume) sets.emplace_back("train.resume=true");
    return cmd_run(common, file, sets, variants, output_dir);
  }
  if (validate->parsed()) return cmd_validate(common, file, sets, variants);
  if (plugins->parsed()) {
    if (describe_flag->count() > 0 && describe.name.empty() && !describe.all) {
      throw ConfigError("plugins --describe: name a component, or pass --all for every one");
    }
    if (describe.all && !describe.name.empty()) {
      throw ConfigError(fmt::format(
          "plugins --describe {} --all: pass either a component's name or --all, not both",
          describe.name));
    }
    return cmd_plugins(common, describe);
  }
  if (bench_comm_cmd->parsed()) return bench_comm(comm_bench);
  if (bench_gemm_cmd->parsed()) return bench_gemm(gemm_bench);
  if (bench_tokenize_cmd->parsed()) return bench_tokenize(tokenize_bench);
  if (bench_step_cmd->parsed()) {
    return with_plugin_host([&](PluginHost& host) -> int {
      load_plugins(host, common);
      return bench_step(host, step_bench);
    });
  }
  if (inspect->parsed()) return inspect_checkpoint(checkpoint, stats, std::cout);
  if (convert->parsed()) {
    if (!convert_config.empty()) convert_options.bert_config = fs::path(convert_config);
    return convert_checkpoint(convert_options, std::cout);
  }
  if (gradcheck->parsed()) {
    GradcheckOptions options;
    options.steps = steps;
    if (!save_baseline.empty()) options.save_baseline = fs::path(save_baseline);
    if (!baseline.empty()) options.baseline = fs::path(baseline);
    return cmd_gradcheck(common, file, sets, variants, output_dir, options);
  }
  if (tokenize->parsed()) return cmd_tokenize(vocab, no_lower_case, ids);
  if (launch->parsed()) return launch_processes(launch_options);
  if (compare->parsed()) {
    compare_options.runs.assign(compare_runs_args.begin(), compare_runs_args.end());
    if (!compare_output.empty()) compare_options.output = fs::path(compare_output);
    return compare_runs(compare_options, std::cout);
  }
  return kExitConfig;
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

/// Takes `--verbose` out of argv (before a `--`, after which the arguments are another
/// command's) and turns it into BERTLAB_DEBUG=1, which every command and the ranks that
/// `bertlab launch` starts read. Returns the new argc.
int take_verbose_flag(int argc, char** argv) {
  int out = 0;
  bool passthrough = false;
  for (int i = 0; i < argc; ++i) {
    if (!passthrough && i > 0 && std::strcmp(argv[i], "--verbose") == 0) {
      setenv("BERTLAB_DEBUG", "1", 1);
      continue;
    }
    passthrough |= std::strcmp(argv[i], "--") == 0;
    argv[out++] = argv[i];
  }
  argv[out] = nullptr;
  return out;
}

}  // namespace
}  // namespace bertlab

int main(int argc, char** argv) {
  using namespace bertlab;
  tune_allocator();
  argc = take_verbose_flag(argc, argv);
  // Messages keep their first part (the what); libtorch's C++ stack traces only with
  // BERTLAB_DEBUG=1 or --verbose (without_stack_trace).
  try {
    return dispatch(argc, argv);
  } catch (const ConfigError& e) {
    for (const auto& line : e.messages()) std::cerr << without_stack_trace(line) << "\n";
    std::cerr << fmt::format("bertlab: {} configuration error{}; nothing was run\n",
                             e.messages().size(), e.messages().size() == 1 ? "" : "s");
    return kExitConfig;
  } catch (const PluginError& e) {
    std::cerr << error_text(e) << "\n";
    return kExitConfig;
  } catch (const Interrupted& e) {
    std::cerr << error_text(e) << "\n";
    return 128 + e.signal();
  } catch (const Error& e) {
    std::cerr << "error: " << error_text(e) << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "error: " << error_text(e) << "\n";
    return kExitFailure;
  }
}
