#pragma once
// Collates converted examples into the tensors of one batch.

#include <bertlab/task.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "input_features.h"

namespace bertlab::classifier {

/// Gathers `features[indices[i]]` into int64 tensors on `device`: "input_ids", "input_mask",
/// "segment_ids" [batch, seq] and "label_ids" [batch]; with `regression` also "label_values"
/// [batch] float. Throws Error on an index out of range.
Batch collate(const std::vector<InputFeatures>& features, const std::vector<int64_t>& indices,
              const c10::Device& device, bool regression = false);

}  // namespace bertlab::classifier
