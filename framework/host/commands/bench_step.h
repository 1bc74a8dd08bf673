#pragma once
// `bertlab bench step`: one training step of BERT with the SQuAD span head or the pretraining
// heads (masked LM and next sentence) on random token ids (AdamWeightDecay, clipping at 1.0),
// timed by phase.

#include <bertlab/config.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bertlab {

class PluginHost;
struct Component;

struct StepBenchOptions {
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  int64_t vocab_size = 30522;
  int64_t batch = 8;  ///< the global batch, split over the replicas
  int64_t seq = 128;
  int steps = 5;    ///< timed steps, after one warm-up step
  int threads = 1;  ///< libtorch intra-op and OpenBLAS threads (per process)
  std::string strategy = "single";
  int replicas = 1;  ///< thread ranks
  bool sparse_embeddings = false;
  /// The strategy's overlap_backward: dense buckets all-reduced while backward runs; the
  /// communication share is then the wait left after backward.
  bool overlap_backward = false;
  double bucket_mb = 0;     ///< the strategy's bucket_mb; 0: its default
  std::string compression;  ///< the strategy's compression (mirrored: fp16, bf16); empty: none
  /// Any other strategy option, KEY=VALUE (powersgd: rank=4).
  std::vector<std::string> strategy_options;
  /// squad: the span head, random answer spans; pretrain: the masked-LM and next-sentence heads,
  /// random masked positions and labels, the masked-LM loss token-weighted as in training.
  std::string task = "squad";
  std::string optimizer = "adam_weight_decay";
  std::string device = "cpu";      ///< cpu, cuda, cuda:N (every replica on it)
  std::string precision = "fp32";  ///< fp32 | bf16 | fp16: the forward pass under autocast
  bool tf32 = false;               ///< TF32 for fp32 matrix products on CUDA
  double dropout = 0.1;            ///< hidden and attention-probability dropout (BERT's 0.1)
  /// per_example | replica | both ([model] dropout_rng); both: one line per mode, same run
  std::string dropout_rng = "per_example";
  /// An adversarial plugin (fgm, pgd, freelb) run in every step; empty: plain training.
  std::string adversarial;
  /// Its options, KEY=VALUE (steps=3).
  std::vector<std::string> adversarial_options;
};

/// Prints one JSON line: step_s (median), tokens_per_second, sequences_per_second, peak_rss_mb,
/// the phases' shares
/// (forward, backward, communication: the all-reduce time not hidden behind backward, optimizer),
/// the model's FLOPs per step and their rate.
int bench_step(const PluginHost& host, const StepBenchOptions& options);

/// For `bench step` and `bench exchange`: the options that `--strategy-option KEY=VALUE` (or
/// `--adversarial-option`, after the component's kind) flags set, typed as `strategy` declares
/// them. Throws ConfigError naming the flag and what to write.
std::map<std::string, OptionValue> strategy_option_values(const std::vector<std::string>& flags,
                                                          const Component& strategy,
                                                          const std::string& command);

}  // namespace bertlab
