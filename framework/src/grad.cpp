// GradientSet: collecting, coalescing, densifying, measuring and clipping gradients.

#include <bertlab/error.h>
#include <bertlab/grad.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include <cmath>

namespace bertlab {

namespace {

// Sums duplicate rows and sorts the indices: (indices, values) of the coalesced form.
std::pair<at::Tensor, at::Tensor> coalesce_rows(const GradientEntry& entry) {
  at::Tensor sparse = at::_sparse_coo_tensor_unsafe(entry.indices.unsqueeze(0), entry.values,
                                                    entry.shape)
                          .coalesce();
  return {sparse._indices().select(0, 0), sparse._values()};
}

// The 2-norm of `t` as a 0-dim tensor. Each tensor's norm is reduced by ATen's pairwise
// reduction in the tensor's own precision; the squares are summed in double by the caller.
at::Tensor norm_of(const at::Tensor& t) { return at::linalg_vector_norm(t, 2); }

}  // namespace

at::Tensor GradientEntry::to_dense() const {
  if (!is_sparse()) return dense;
  return at::zeros(shape, values.options()).index_add_(0, indices, values);
}

GradientSet GradientSet::from_module(const torch::nn::Module& module) {
  GradientSet set;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const at::Tensor& param = item.value();
    GradientEntry entry;
    entry.name = item.key();
    entry.shape = param.sizes().vec();
    const at::Tensor& grad = param.grad();
    if (!grad.defined()) {
      entry.dense = at::zeros_like(param, at::MemoryFormat::Contiguous);
    } else if (grad.is_sparse()) {
      BERTLAB_CHECK(grad.sparse_dim() == 1,
                    "parameter {}: a sparse gradient must index rows (sparse_dim 1), got {}",
                    entry.name, grad.sparse_dim());
      entry.indices = grad._indices().select(0, 0);
      entry.values = grad._values();
    } else {
      entry.dense = grad;
    }
    set.entries_.push_back(std::move(entry));
  }
  return set;
}

GradientEntry* GradientSet::find(const std::string& name) {
  for (auto& entry : entries_) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

void GradientSet::coalesce() {
  c10::NoGradGuard no_grad;
  for (auto& entry : entries_) {
    if (!entry.is_sparse()) continue;
    std::tie(entry.indices, entry.values) = coalesce_rows(entry);
  }
}

void GradientSet::densify() {
  c10::NoGradGuard no_grad;
  for (auto& entry : entries_) {
    if (!entry.is_sparse()) continue;
    entry.dense = entry.to_dense();
    entry.indices = at::Tensor();
    entry.values = at::Tensor();
  }
}

double GradientSet::global_norm(NormMode mode) const {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  norms.reserve(entries_.size());
  for (const auto& entry : entries_) {
    if (!entry.is_sparse()) {
      norms.push_back(norm_of(entry.dense));
    } else if (mode == NormMode::kUncoalesced) {
      norms.push_back(norm_of(entry.values));
    } else {
      // The norm of the dense gradient is the norm of the coalesced rows; coalesce a copy
      // rather than densifying (nnz rows instead of vocab_size rows).
      norms.push_back(norm_of(coalesce_rows(entry).second));
    }
  }
  if (norms.empty()) return 0.0;
  // Squares summed in double, with one device-to-host transfer for all entries.
  const at::Device device = norms.front().device();
  for (auto& n : norms) n = n.to(device, at::kDouble);
  at::Tensor all = at::stack(norms);
  return std::sqrt(all.mul(all).sum().item<double>());
}

void GradientSet::scale(double factor) {
  c10::NoGradGuard no_grad;
  for (auto& entry : entries_) {
    if (entry.is_sparse()) {
      entry.values.mul_(factor);
    } else {
      entry.dense.mul_(factor);
    }
  }
}

double GradientSet::clip_by_global_norm(double clip_norm, NormMode mode) {
  BERTLAB_CHECK(clip_norm > 0, "clip_norm must be > 0, got {}", clip_norm);
  const double norm = global_norm(mode);
  // Google's clip_by_global_norm multiplies by clip_norm / max(norm, clip_norm): a factor of
  // exactly 1 below the threshold, so those gradients are left alone.
  if (norm > clip_norm) scale(clip_norm / norm);
  return norm;
}

}  // namespace bertlab
