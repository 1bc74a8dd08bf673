#pragma once
// The two naming schemes of BERT's weights: Google's TensorFlow variables
// (bert/encoder/layer_0/attention/self/query/kernel, a kernel stored [in, out]) and Hugging
// Face's parameters, which bertlab uses (bert.encoder.layer.0.attention.self.query.weight,
// stored [out, in]).

#include <bertlab/io/checkpoint.h>

#include <optional>
#include <string>
#include <vector>

namespace bertlab {

/// What one stored tensor is.
struct MappedName {
  enum class Kind {
    kWeight,         ///< a model weight; `name` is its bertlab name
    kOptimizerSlot,  ///< an optimizer slot (TF adam_m / adam_v, Adam, Adam_1): not a weight
    kGlobalStep,     ///< TF's global_step counter
    kBuffer,         ///< a Hugging Face buffer that is no weight (embeddings.position_ids)
  };
  Kind kind = Kind::kWeight;
  std::string name;        ///< bertlab name for kWeight
  bool transpose = false;  ///< a TF kernel: transpose to get the bertlab layout
};

/// Google's TF variable name → bertlab, covering BERT, the pretraining heads (cls/predictions,
/// cls/seq_relationship), run_classifier.py's output_weights/output_bias and run_squad.py's
/// cls/squad. nullopt for a name none of these uses.
std::optional<MappedName> map_google_name(const std::string& tf_name, int64_t dims);

/// A Hugging Face / PyTorch name → bertlab: LayerNorm gamma/beta become weight/bias (older
/// checkpoints), a bare BertModel's names get the "bert." prefix.
MappedName map_hf_name(const std::string& name);

/// bertlab name → Google's TF name and whether the tensor is transposed on the way; nullopt
/// for a tensor Google's checkpoints do not hold (the tied decoder weight).
std::optional<MappedName> google_name_of(const std::string& bertlab_name, int64_t dims);

/// A stored tensor that is not a weight, and why.
struct SkippedTensor {
  std::string name;    ///< as stored
  std::string reason;  ///< "optimizer slot", "global_step", "buffer", "unknown name"
};

/// The checkpoint's weights under bertlab names and layouts (TF kernels transposed); whatever
/// is not a weight goes to `skipped`.
NamedTensors to_bertlab_names(const Checkpoint& checkpoint, std::vector<SkippedTensor>* skipped);

/// bertlab-named weights → Google's names and layouts (for `bertlab convert --names google`).
NamedTensors to_google_names(const NamedTensors& weights, std::vector<SkippedTensor>* skipped);

}  // namespace bertlab
