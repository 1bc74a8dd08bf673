#pragma once
// A task: the data, the head on top of BERT, the loss and the evaluation.
// Replicas run as threads in one process, so the const methods must be thread-safe; each
// replica has its own model.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace bertlab {

struct BertConfig;
class FullTokenizer;

/// Named input tensors of one batch: "input_ids", "input_mask", "segment_ids", "label_ids", ...
using Batch = std::map<std::string, at::Tensor>;

/// Ordered metric name → value, as written to eval_results.json.
using Metrics = std::vector<std::pair<std::string, double>>;

struct TaskContext {
  const BertConfig* bert_config = nullptr;   ///< the resolved model configuration
  const FullTokenizer* tokenizer = nullptr;  ///< from [model] vocab_file / do_lower_case
  uint64_t seed = 0;                         ///< [experiment] seed
  std::filesystem::path output_dir;          ///< runs/<experiment>/<variant>/
};

struct EvalContext {
  c10::Device device = c10::Device(c10::kCPU);
  int64_t eval_batch_size = 8;
  /// Where the task may write predictions; empty (an evaluation during training): nowhere.
  std::filesystem::path output_dir;
};

/// What a Hugging Face export says of a task's model (`bertlab export --hf`, config.json).
struct HfModelHead {
  /// transformers' class for the model and its head ("BertForSequenceClassification",
  /// "BertForQuestionAnswering", "BertForPreTraining"); empty: "BertModel", no head.
  std::string architecture;
  std::vector<std::string> labels;  ///< classification: id2label, in id order
  /// "single_label_classification" or "regression" for a classifier; empty otherwise.
  std::string problem_type;
};

/// What a model that learned nothing scores on the evaluation set, shown beside the variants in
/// every comparison so that such a model is visible as one (classification: the most frequent
/// training label answered for every evaluation example).
struct FloorMetrics {
  std::string name;  ///< e.g. "majority class (DESC)"; empty: the task states no floor
  Metrics metrics;   ///< under evaluate()'s metric names (those a constant answer has)
};

struct LossOutput {
  /// Scalar, the mean loss over the batch's examples, with autograd history (undefined when
  /// the task has only a token-weighted part).
  at::Tensor loss;
  int64_t num_examples = 0;  ///< examples in the batch
  /// Token-weighted tasks (token_weighted_loss()): the scalar *sum* of the weighted per-token
  /// losses (e.g. masked LM: Σ weight·cross-entropy). The host divides it by the weight of the
  /// whole global batch ([strategy] loss_normalization = "global") or of this replica's part
  /// ("per_replica") and adds it to `loss`. Undefined otherwise.
  at::Tensor weighted_loss_sum;
};

/// Which part of a streamed training set one replica reads: of every `micro_batch` examples in
/// stream order, those in [begin, begin + count) (replica r of N: begin = r·count).
struct StreamShard {
  int64_t micro_batch = 0;
  int64_t begin = 0;
  int64_t count = 0;
};

/// A replica's training examples read in order from files that need not fit in memory.
class TrainStream {
 public:
  virtual ~TrainStream() = default;
  /// This replica's part of the next micro-batch, collated on `device` (blocks until read).
  virtual Batch next(const c10::Device& device) = 0;
  /// Where the stream stands after the batches next() returned: text that open_train_stream()
  /// takes back to resume there. The host keeps it in the training checkpoint.
  virtual std::string position() const = 0;
};

class Task {
 public:
  virtual ~Task() = default;
  /// Reads and featurizes the data. Called once per variant, before training.
  virtual void prepare(const TaskContext& ctx) = 0;
  /// Number of training examples (features) the batches index into.
  virtual int64_t num_train_examples() const = 0;
  /// A freshly initialized model: a submodule named "bert" (BertModel) and the task head,
  /// drawing from libtorch's global generator (the host seeds it).
  virtual std::shared_ptr<torch::nn::Module> create_model(const BertConfig& config,
                                                          bool sparse_embeddings) const = 0;
  /// Collates training examples (indices into the training set) on `device`.
  virtual Batch make_train_batch(const std::vector<int64_t>& indices,
                                 const c10::Device& device) const = 0;
  /// Forward and loss of `model` (from create_model) on `batch`, in the model's current mode.
  virtual LossOutput compute_loss(torch::nn::Module& model, const Batch& batch) const = 0;
  /// Whether compute_loss() returns a weighted_loss_sum to be normalized by loss_weight().
  virtual bool token_weighted_loss() const { return false; }
  /// Token-weighted tasks: the total weight of `batch` (e.g. its number of masked positions),
  /// which the host sums over the replicas and micro-batches of a step to normalize by.
  virtual double loss_weight(const Batch& /*batch*/) const { return 0.0; }
  /// Whether the training examples are streamed (open_train_stream) rather than indexed
  /// (make_train_batch); a streaming task may report 0 num_train_examples(), and then the
  /// experiment must set [train] num_train_steps.
  virtual bool streams_train_data() const { return false; }
  /// Streaming tasks: one replica's stream of the training examples, from `position` (empty:
  /// the start, else what TrainStream::position() returned). Every replica opens its own.
  virtual std::unique_ptr<TrainStream> open_train_stream(const StreamShard& /*shard*/,
                                                         const std::string& /*position*/) const {
    return nullptr;
  }
  /// Evaluates `model` (in eval mode) on the task's evaluation set.
  virtual Metrics evaluate(torch::nn::Module& model, const EvalContext& ctx) const = 0;
  /// The model's class and head as Hugging Face transformers names them, after prepare().
  virtual HfModelHead hf_model_head() const { return {}; }
  /// The evaluation set's floor, after prepare() (none by default).
  virtual FloorMetrics floor_metrics() const { return {}; }
};

}  // namespace bertlab
