// `bertlab bench NAME`: the built-in benchmarks (comm, step, exchange, tokenize, gemm) as
// subcommands; plugins add more (`bertlab bench squad-features`) as tools of the group `bench`.

#include <memory>

#include "commands/bench_comm.h"
#include "commands/bench_exchange.h"
#include "commands/bench_gemm.h"
#include "commands/bench_step.h"
#include "commands/bench_tokenize.h"
#include "commands/commands.h"
#include "runtime/plugin_host.h"

namespace bertlab {

namespace {

Command define_comm(CommandLine& bench) {
  auto o = std::make_shared<CommBenchOptions>();
  CommandLine c =
      bench.subcommand("comm", "all-reduce and all-gather bandwidth (Gloo, thread ranks)");
  c.option("--world", o->world, "ranks (default 2)");
  c.option("--mb", o->mb, "MiB per rank (default 64)");
  c.option("--iters", o->iterations, "timed repetitions (default 5)");
  return {c, [o] { return bench_comm(*o); }};
}

/// The model and batch of `bench step` (Base by default).
void add_step_shape(CommandLine& c, StepBenchOptions& o) {
  c.option("--hidden-size", o.hidden_size, "default 768");
  c.option("--num-hidden-layers", o.num_hidden_layers, "default 12");
  c.option("--num-attention-heads", o.num_attention_heads, "default 12");
  c.option("--intermediate-size", o.intermediate_size, "default 3072");
  c.option("--vocab-size", o.vocab_size, "default 30522");
  c.option("--batch", o.batch, "global batch (default 8)");
  c.option("--seq", o.seq, "tokens per example (default 128)");
  c.option("--steps", o.steps, "timed steps after a warm-up (default 5)");
  c.option("--threads", o.threads, "libtorch and OpenBLAS threads (default 1)");
}

/// How `bench step` trains: task, strategy, replicas, optimizer, device, precision, dropout.
void add_step_training(CommandLine& c, StepBenchOptions& o) {
  c.option("--task", o.task,
           "squad (default: the span head) or pretrain (masked-LM and next-sentence heads)");
  c.option("--strategy", o.strategy,
           "a strategy plugin: single (default), mirrored, sparse_allgather, powersgd, "
           "local_sgd, zero1");
  c.option("--strategy-option", o.strategy_options,
           "KEY=VALUE: another option of the strategy, e.g. rank=4 for powersgd (repeatable)");
  c.option("--replicas", o.replicas, "thread ranks (default 1)");
  c.flag("--sparse-embeddings", o.sparse_embeddings, "word-embedding gradient as sparse rows");
  c.flag("--overlap-backward", o.overlap_backward,
         "the strategy's overlap_backward: all-reduce while backward runs");
  c.option("--compression", o.compression,
           "the strategy's compression: fp16 or bf16 buckets on the wire (mirrored)");
  c.option("--bucket-mb", o.bucket_mb,
           "the strategy's all-reduce bucket MiB (default: its default)");
  c.option("--optimizer", o.optimizer, "default adam_weight_decay");
  c.option("--device", o.device, "cpu (default), cuda or cuda:N");
  c.option("--precision", o.precision,
           "fp32 (default), bf16 or fp16 (CUDA): autocast of the forward pass");
  c.flag("--tf32", o.tf32, "TF32 fp32 matrix products on CUDA");
  c.option("--dropout", o.dropout, "hidden and attention dropout (default 0.1, as BERT)");
  c.option("--dropout-rng", o.dropout_rng,
           "per_example (default), replica, or both: one line per mode");
  c.option("--adversarial", o.adversarial,
           "an adversarial plugin run in every step: fgm, pgd or freelb (default: none)");
  c.option("--adversarial-option", o.adversarial_options,
           "KEY=VALUE: an option of the adversarial plugin, e.g. steps=3 (repeatable)");
}

/// The benchmark `c` with the plugin flags; its action loads the plugins and runs
/// `bench(host, *o)`.
template <class Options>
Command with_plugins(CommandLine& c, const std::shared_ptr<Options>& o, PluginOptions& plugins,
                     int (*bench)(const PluginHost&, const Options&)) {
  add_plugin_options(c, plugins);
  return {c, [o, &plugins, bench] {
            return with_plugin_host([&](PluginHost& host) -> int {
              load_plugins(host, plugins);
              return bench(host, *o);
            });
          }};
}

Command define_step(CommandLine& bench, PluginOptions& plugins) {
  auto o = std::make_shared<StepBenchOptions>();
  CommandLine c = bench.subcommand(
      "step",
      "a BERT training step (SQuAD or pretraining heads, random ids): time by phase, tokens/s, "
      "RSS");
  add_step_shape(c, *o);
  add_step_training(c, *o);
  return with_plugins(c, o, plugins, bench_step);
}

Command define_exchange(CommandLine& bench, PluginOptions& plugins) {
  auto o = std::make_shared<ExchangeBenchOptions>();
  CommandLine c = bench.subcommand(
      "exchange",
      "bytes a strategy sends to average BERT's word-embedding gradient (thread ranks)");
  c.option("--strategy", o->strategy, "a strategy plugin (default mirrored)");
  c.option("--strategy-option", o->strategy_options,
           "KEY=VALUE: an option of the strategy, e.g. compression=fp16 or rank=4 (repeatable)");
  c.option("--replicas", o->replicas, "thread ranks (default 2)");
  c.option("--vocab-size", o->vocab_size, "rows V (default 30522, BERT-Base)");
  c.option("--hidden-size", o->hidden_size, "row width H (default 768)");
  c.option("--tokens", o->tokens, "tokens per replica and step (default 4096 = 32 x 128)");
  c.flag("--sparse-embeddings", o->sparse_embeddings,
         "the gradient as sparse rows, one per token (default: the dense table)");
  c.option("--steps", o->steps, "exchanges; the last one's bytes are reported (default 3)");
  return with_plugins(c, o, plugins, bench_exchange);
}

Command define_tokenize(CommandLine& bench) {
  auto o = std::make_shared<TokenizeBenchOptions>();
  CommandLine c = bench.subcommand("tokenize", "WordPiece tokenization speed (MB/s, tokens/s)");
  c.required_option("--vocab", o->vocab_file, "vocab.txt");
  c.required_option("--input", o->input, "a text file");
  c.flag("--no-lower-case{false}", o->do_lower_case, "keep case (cased models)");
  c.option("--threads", o->threads, "threads of the parallel run (default: one per core)");
  c.option("--repeats", o->repeats,
           "timed passes over the input; the fastest is reported (default 3)");
  return {c, [o] { return bench_tokenize(*o); }};
}

Command define_gemm(CommandLine& bench) {
  auto o = std::make_shared<GemmBenchOptions>();
  CommandLine c =
      bench.subcommand("gemm", "float32 matrix-product rate (GFLOP/s) at a thread count");
  c.option("--size", o->size, "square matrices (default 1024)");
  c.option("--threads", o->threads, "default 1");
  c.option("--iters", o->iterations, "timed products (default 10)");
  return {c, [o] { return bench_gemm(*o); }};
}

}  // namespace

Command define_bench_command(CommandLine& parent, PluginOptions& plugins) {
  CommandLine bench = parent.subcommand("bench", "measure this machine");
  bench.require_subcommand();
  auto benches = std::make_shared<std::vector<Command>>(std::vector<Command>{
      define_comm(bench), define_step(bench, plugins), define_exchange(bench, plugins),
      define_tokenize(bench), define_gemm(bench)});
  return {bench, [benches] {
            for (const Command& b : *benches) {
              if (b.command.parsed()) return b.action();
            }
            return 2;  // unreachable: require_subcommand(1)
          }};
}

}  // namespace bertlab
