// `bertlab bench NAME`: the built-in benchmarks (comm, step, tokenize, gemm) as subcommands;
// plugins add more (`bertlab bench squad-features`) as tools of the group `bench`.

#include <CLI/CLI.hpp>

#include <memory>

#include "commands/bench_comm.h"
#include "commands/bench_gemm.h"
#include "commands/bench_step.h"
#include "commands/bench_tokenize.h"
#include "commands/commands.h"
#include "runtime/plugin_host.h"

namespace bertlab {

namespace {

Command define_comm(CLI::App& bench) {
  auto o = std::make_shared<CommBenchOptions>();
  CLI::App* c =
      bench.add_subcommand("comm", "all-reduce and all-gather bandwidth (Gloo, thread ranks)");
  c->add_option("--world", o->world, "ranks (default 2)");
  c->add_option("--mb", o->mb, "MiB per rank (default 64)");
  c->add_option("--iters", o->iterations, "timed repetitions (default 5)");
  return {c, [o] { return bench_comm(*o); }};
}

/// The model and batch of `bench step` (Base by default).
void add_step_shape(CLI::App& c, StepBenchOptions& o) {
  c.add_option("--hidden-size", o.hidden_size, "default 768");
  c.add_option("--num-hidden-layers", o.num_hidden_layers, "default 12");
  c.add_option("--num-attention-heads", o.num_attention_heads, "default 12");
  c.add_option("--intermediate-size", o.intermediate_size, "default 3072");
  c.add_option("--vocab-size", o.vocab_size, "default 30522");
  c.add_option("--batch", o.batch, "global batch (default 8)");
  c.add_option("--seq", o.seq, "tokens per example (default 128)");
  c.add_option("--steps", o.steps, "timed steps after a warm-up (default 5)");
  c.add_option("--threads", o.threads, "libtorch and OpenBLAS threads (default 1)");
}

/// How `bench step` trains: strategy, replicas, optimizer, device, precision, dropout.
void add_step_training(CLI::App& c, StepBenchOptions& o) {
  c.add_option("--strategy", o.strategy, "single|mirrored|sparse_allgather");
  c.add_option("--replicas", o.replicas, "thread ranks (default 1)");
  c.add_flag("--sparse-embeddings", o.sparse_embeddings, "word-embedding gradient as sparse rows");
  c.add_flag("--overlap-backward", o.overlap_backward,
             "the strategy's overlap_backward: all-reduce while backward runs");
  c.add_option("--bucket-mb", o.bucket_mb,
               "the strategy's all-reduce bucket MiB (default: its default)");
  c.add_option("--optimizer", o.optimizer, "default adam_weight_decay");
  c.add_option("--device", o.device, "cpu (default), cuda or cuda:N");
  c.add_option("--precision", o.precision,
               "fp32 (default), bf16 or fp16 (CUDA): autocast of the forward pass");
  c.add_flag("--tf32", o.tf32, "TF32 fp32 matrix products on CUDA");
  c.add_option("--dropout", o.dropout, "hidden and attention dropout (default 0.1, as BERT)");
  c.add_option("--dropout-rng", o.dropout_rng,
               "per_example (default), replica, or both: one line per mode");
}

Command define_step(CLI::App& bench, PluginOptions& plugins) {
  auto o = std::make_shared<StepBenchOptions>();
  CLI::App* c = bench.add_subcommand(
      "step", "a BERT training step (SQuAD span head, random ids): time by phase, tokens/s, RSS");
  add_step_shape(*c, *o);
  add_step_training(*c, *o);
  add_plugin_options(*c, plugins);
  return {c, [o, &plugins] {
            return with_plugin_host([&](PluginHost& host) -> int {
              load_plugins(host, plugins);
              return bench_step(host, *o);
            });
          }};
}

Command define_tokenize(CLI::App& bench) {
  auto o = std::make_shared<TokenizeBenchOptions>();
  CLI::App* c = bench.add_subcommand("tokenize", "WordPiece tokenization speed (MB/s, tokens/s)");
  c->add_option("--vocab", o->vocab_file, "vocab.txt")->required();
  c->add_option("--input", o->input, "a text file")->required();
  c->add_flag("--no-lower-case{false}", o->do_lower_case, "keep case (cased models)");
  c->add_option("--threads", o->threads, "threads of the parallel run (default: one per core)");
  c->add_option("--repeats", o->repeats,
                "timed passes over the input; the fastest is reported (default 3)");
  return {c, [o] { return bench_tokenize(*o); }};
}

Command define_gemm(CLI::App& bench) {
  auto o = std::make_shared<GemmBenchOptions>();
  CLI::App* c =
      bench.add_subcommand("gemm", "float32 matrix-product rate (GFLOP/s) at a thread count");
  c->add_option("--size", o->size, "square matrices (default 1024)");
  c->add_option("--threads", o->threads, "default 1");
  c->add_option("--iters", o->iterations, "timed products (default 10)");
  return {c, [o] { return bench_gemm(*o); }};
}

}  // namespace

Command define_bench_command(CLI::App& parent, PluginOptions& plugins) {
  CLI::App* bench = parent.add_subcommand("bench", "measure this machine");
  bench->require_subcommand(1);
  auto benches = std::make_shared<std::vector<Command>>(
      std::vector<Command>{define_comm(*bench), define_step(*bench, plugins),
                           define_tokenize(*bench), define_gemm(*bench)});
  return {bench, [benches] {
            for (const Command& b : *benches) {
              if (b.app->parsed()) return b.action();
            }
            return 2;  // unreachable: require_subcommand(1)
          }};
}

}  // namespace bertlab
