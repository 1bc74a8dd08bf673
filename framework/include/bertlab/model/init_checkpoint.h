#pragma once
// Initializing a model from a checkpoint ([model] init_checkpoint), and the report of what was
// loaded, as Google's run_*.py log "Initialized from checkpoint" per variable.

#include <bertlab/io/checkpoint.h>
#include <bertlab/model/weight_names.h>

#include <filesystem>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace bertlab {

struct BertConfig;

/// What init_from_checkpoint() did, written as init_report.json.
struct InitReport {
  CheckpointLocation checkpoint;
  std::vector<std::string> loaded;   ///< model parameters set from the checkpoint
  std::vector<std::string> missing;  ///< model parameters the checkpoint lacks: kept as initialized
  std::vector<std::string> excluded;  ///< model parameters matched by init_checkpoint_exclude
  std::vector<SkippedTensor> unused;  ///< stored tensors not loaded, and why
  std::vector<std::string> notes;     ///< anything else worth knowing (e.g. the vocabulary)

  /// The report as JSON (every list in full).
  std::string to_json() const;
  /// One log line: counts, and the missing parameters by name.
  std::string summary() const;
};

/// Differences between `config` and the shapes of the checkpoint's bertlab-named `weights` (and
/// the bert_config in safetensors `metadata`, when there): one line per field, e.g.
/// "vocab_size: bert_config says 30522, bert.embeddings.word_embeddings.weight has 402 rows".
std::vector<std::string> config_mismatches(const BertConfig& config, const NamedTensors& weights,
                                           const std::map<std::string, std::string>& metadata);

/// Copies every checkpoint weight whose bertlab name is a parameter of `model` into it.
/// Parameters whose name contains one of `exclude` keep their initialization. Throws ConfigError
/// listing every config mismatch and every tensor whose shape differs (both shapes named).
InitReport init_from_checkpoint(torch::nn::Module& model, const Checkpoint& checkpoint,
                                const BertConfig& config, const std::vector<std::string>& exclude);

}  // namespace bertlab
