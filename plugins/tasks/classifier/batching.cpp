#include "batching.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>

#include <algorithm>

namespace bertlab::classifier {

Batch collate(const std::vector<InputFeatures>& features, const std::vector<int64_t>& indices,
              const c10::Device& device, bool regression) {
  BERTLAB_CHECK(!indices.empty(), "cannot collate an empty batch");
  const auto batch_size = static_cast<int64_t>(indices.size());
  const auto num_features = static_cast<int64_t>(features.size());
  for (const int64_t index : indices) {
    BERTLAB_CHECK(index >= 0 && index < num_features,
                  "example index {} is out of range: the set has {} examples", index, num_features);
  }
  const auto seq_length = static_cast<int64_t>(features[indices[0]].input_ids.size());

  at::Tensor input_ids = at::empty({batch_size, seq_length}, at::kLong);
  at::Tensor input_mask = at::empty({batch_size, seq_length}, at::kLong);
  at::Tensor segment_ids = at::empty({batch_size, seq_length}, at::kLong);
  at::Tensor label_ids = at::empty({batch_size}, at::kLong);
  at::Tensor label_values = at::empty({batch_size}, at::kFloat);
  int64_t* ids_out = input_ids.data_ptr<int64_t>();
  int64_t* mask_out = input_mask.data_ptr<int64_t>();
  int64_t* segments_out = segment_ids.data_ptr<int64_t>();
  int64_t* labels_out = label_ids.data_ptr<int64_t>();
  float* values_out = label_values.data_ptr<float>();
  for (int64_t row = 0; row < batch_size; ++row) {  // row: position in the batch
    const InputFeatures& f = features[indices[row]];
    BERTLAB_CHECK(static_cast<int64_t>(f.input_ids.size()) == seq_length,
                  "example {} has {} tokens, the batch {}", indices[row], f.input_ids.size(),
                  seq_length);
    std::copy(f.input_ids.begin(), f.input_ids.end(), ids_out + row * seq_length);
    std::copy(f.input_mask.begin(), f.input_mask.end(), mask_out + row * seq_length);
    std::copy(f.segment_ids.begin(), f.segment_ids.end(), segments_out + row * seq_length);
    labels_out[row] = f.label_id;
    values_out[row] = f.label_value;
  }
  Batch batch{{"input_ids", input_ids.to(device)},
              {"input_mask", input_mask.to(device)},
              {"segment_ids", segment_ids.to(device)},
              {"label_ids", label_ids.to(device)}};
  if (regression) batch.emplace("label_values", label_values.to(device));
  return batch;
}

}  // namespace bertlab::classifier
