#pragma once
// `bertlab bench exchange`: what one strategy sends to average the word-embedding gradient of
// BERT (V × H, the rows of this replica's tokens), per rank and step, over thread ranks.

#include <cstdint>
#include <string>
#include <vector>

namespace bertlab {

class PluginHost;

struct ExchangeBenchOptions {
  std::string strategy = "mirrored";
  std::vector<std::string> strategy_options;  ///< KEY=VALUE
  int replicas = 2;                           ///< thread ranks
  int64_t vocab_size = 30522;                 ///< V, BERT-Base's
  int64_t hidden_size = 768;                  ///< H
  int64_t tokens = 32 * 128;                  ///< per replica and step: its batch × sequence
  bool sparse_embeddings = false;             ///< the gradient as sparse rows (one per token)
  int steps = 3;                              ///< exchanges, each a new gradient
};

/// Prints one JSON line: the bytes rank 0 contributed to collectives in the last step (dense
/// and sparse), the median seconds of an exchange, and the table's dense bytes for scale.
int bench_exchange(const PluginHost& host, const ExchangeBenchOptions& options);

}  // namespace bertlab
