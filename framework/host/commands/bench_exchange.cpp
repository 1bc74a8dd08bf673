// `bertlab bench exchange`: one strategy's reduce_gradients on a BERT-sized word-embedding
// gradient, over Gloo thread ranks; the bytes each rank contributes and the time.

#include "commands/bench_exchange.h"

#include <ATen/ATen.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/strategy.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands/bench_step.h"
#include "runtime/plugin_host.h"
#include "train/replica_group.h"

namespace bertlab {

namespace {

void check(bool ok, const std::string& message) {
  if (!ok) throw ConfigError("bench exchange: " + message);
}

/// Rank `rank`'s embedding gradient of step `step`: one row per token, token ids uniform over
/// the vocabulary (repeats as real text has them, fewer), values standard normal; sparse rows
/// as autograd leaves them (uncoalesced), or their dense sum.
GradientEntry embedding_gradient(const ExchangeBenchOptions& o, int rank, int step) {
  at::Generator gen = at::detail::createCPUGenerator(1000 * static_cast<uint64_t>(step) +
                                                     static_cast<uint64_t>(rank));
  GradientEntry e;
  e.name = "bert.embeddings.word_embeddings.weight";
  e.shape = {o.vocab_size, o.hidden_size};
  e.indices = at::randint(o.vocab_size, {o.tokens}, gen, at::kLong);
  e.values = at::randn({o.tokens, o.hidden_size}, gen, at::kFloat);
  if (!o.sparse_embeddings) {
    e.dense = e.to_dense();
    e.indices = e.values = at::Tensor();
  }
  return e;
}

}  // namespace

int bench_exchange(const PluginHost& host, const ExchangeBenchOptions& o) {
  check(o.replicas >= 2, fmt::format("--replicas must be >= 2, got {}", o.replicas));
  check(o.vocab_size >= 1 && o.hidden_size >= 1 && o.tokens >= 1,
        "--vocab-size, --hidden-size and --tokens must be >= 1");
  check(o.steps >= 1, fmt::format("--steps must be >= 1, got {}", o.steps));
  const Component* c = host.registry().find(ComponentKind::kStrategy, o.strategy);
  check(c != nullptr,
        fmt::format("no strategy named '{}'; `bertlab plugins` lists them", o.strategy));
  const ConfigView view("strategy", c->spec.options,
                        strategy_option_values(o.strategy_options, *c, "bench exchange"));
  std::vector<double> seconds;
  int64_t dense_bytes = 0, sparse_bytes = 0, max_rows = 0;
  run_thread_ranks(o.replicas, std::chrono::seconds(600), c10::Device(c10::kCPU),
                   [&](int rank, Communicator& comm) {
                     auto strategy = c->strategy_factory(view);
                     for (int step = 0; step < o.steps; ++step) {
                       GradientSet grads;
                       grads.add(embedding_gradient(o, rank, step));
                       if (o.sparse_embeddings && step + 1 == o.steps) {
                         // The cost model's nnz: the most distinct rows on a rank.
                         const at::Tensor rows = at::tensor(
                             {std::get<0>(at::_unique(grads.entries()[0].indices)).numel()});
                         for (const auto& r : comm.all_gather(rows)) {
                           if (rank == 0) max_rows = std::max(max_rows, r.item<int64_t>());
                         }
                       }
                       comm.barrier();
                       comm.reset_traffic();
                       strategy->begin_step(step);
                       const auto t0 = std::chrono::steady_clock::now();
                       strategy->reduce_gradients(grads, comm);
                       const auto t1 = std::chrono::steady_clock::now();
                       if (rank != 0) continue;
                       seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
                       dense_bytes = comm.traffic_bytes(Traffic::kDense);
                       sparse_bytes = comm.traffic_bytes(Traffic::kSparse);
                     }
                   });
  std::sort(seconds.begin(), seconds.end());
  nlohmann::ordered_json j;
  j["strategy"] = o.strategy;
  for (const std::string& kv : o.strategy_options) {
    j["strategy." + kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  }
  j["replicas"] = o.replicas;
  j["vocab_size"] = o.vocab_size;
  j["hidden_size"] = o.hidden_size;
  j["tokens"] = o.tokens;
  j["sparse_embeddings"] = o.sparse_embeddings;
  j["steps"] = o.steps;
  j["table_bytes"] = o.vocab_size * o.hidden_size * 4;
  // Rank 0's, in the last step (after PowerSGD's exact steps, when --steps passes start_step).
  j["comm_dense_bytes"] = dense_bytes;
  j["comm_sparse_bytes"] = sparse_bytes;
  // What a ring moves per rank: an all-reduce 2(N−1)/N of its input, an all-gather N−1 times.
  const double n = o.replicas;
  j["ring_bytes"] = static_cast<double>(dense_bytes) * 2 * (n - 1) / n +
                    static_cast<double>(sparse_bytes) * (n - 1);
  if (o.sparse_embeddings) {
    // docs/gradient-averaging.md's cost model, in bytes: rows (N−1)·nnz·(8 + 4H), the table
    // 2(N−1)/N·4VH.
    j["max_rows"] = max_rows;
    j["model_rows_bytes"] = (n - 1) * static_cast<double>(max_rows * (8 + 4 * o.hidden_size));
    j["model_dense_bytes"] =
        2 * (n - 1) / n * 4 * static_cast<double>(o.vocab_size * o.hidden_size);
  }
  j["exchange_s"] = seconds[seconds.size() / 2];
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace bertlab
