#include "adam_weight_decay.h"

#include <bertlab/error.h>
#include <bertlab/log.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

namespace bertlab::adam_weight_decay {

namespace {

// Elements per task of the fused CPU update.
constexpr int64_t kGrainSize = 32768;

SparseUpdate parse_sparse_update(const std::string& name) {
  if (name == "dense") return SparseUpdate::kDense;
  if (name == "scatter_duplicates") return SparseUpdate::kScatterDuplicates;
  throw ConfigError(fmt::format(
      "[optimizer] sparse_update must be one of dense|scatter_duplicates, got \"{}\"", name));
}

// The coefficients of one update, in the precision of the fused kernel. weight_decay is 0 for
// an excluded parameter (w + 0·w adds exactly nothing); grad_scale is the clipping factor.
struct Coefficients {
  float beta_1, one_minus_beta_1, beta_2, one_minus_beta_2, epsilon, weight_decay, lr, grad_scale;
};

// The kernels below are compiled twice on x86-64 with GCC, for AVX2 and for the baseline, and
// the loader picks the one the CPU runs (the baseline's 128-bit vectors halve the throughput).
// Without FMA in either, both round exactly as the scalar code does.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BERTLAB_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BERTLAB_SIMD_CLONES
#endif

// Google's update of one element. `g_sq` is what enters v: g * g, or for scatter_duplicates the
// sum of the squares of the duplicates.
inline void adam_element(float& w, float& m, float& v, float g, float g_sq, const Coefficients& c) {
  const float mi = c.beta_1 * m + c.one_minus_beta_1 * g;
  const float vi = c.beta_2 * v + c.one_minus_beta_2 * g_sq;
  const float update = mi / (std::sqrt(vi) + c.epsilon) + c.weight_decay * w;
  w -= c.lr * update;
  m = mi;
  v = vi;
}

// One pass over n contiguous elements: reads w, g, m, v once and writes w, m, v once, where the
// equivalent tensor ops make about ten passes and allocate temporaries the size of the
// parameter. g == nullptr: a zero gradient; g_sq == nullptr: g·g (after grad_scale) enters v.
BERTLAB_SIMD_CLONES void adam_span(float* __restrict w, const float* __restrict g,
                                   const float* __restrict g_sq, float* __restrict m,
                                   float* __restrict v, int64_t n, const Coefficients c) {
  if (g == nullptr) {
    for (int64_t i = 0; i < n; ++i) adam_element(w[i], m[i], v[i], 0.F, 0.F, c);
  } else if (g_sq == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] * c.grad_scale;
      adam_element(w[i], m[i], v[i], gi, gi * gi, c);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) adam_element(w[i], m[i], v[i], g[i], g_sq[i], c);
  }
}

void fused_dense(float* w, const float* g, float* m, float* v, int64_t n, const Coefficients& c) {
  at::parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
    adam_span(w + begin, g + begin, nullptr, m + begin, v + begin, end - begin, c);
  });
}

// Row gradients of a [rows, width] parameter: rows[k] (unique) carries sum[k] and, when
// defined, sum_sq[k] (else sum[k]^2 enters v). Rows without a gradient get g = 0, exactly as
// in the dense update, without materializing the dense gradient.
struct RowGradient {
  at::Tensor rows;    // [nnz] int64, unique
  at::Tensor sum;     // [nnz, width] float
  at::Tensor sum_sq;  // [nnz, width] float, or undefined
};

void fused_rows(float* w, float* m, float* v, int64_t num_rows, int64_t width,
                const RowGradient& grad, const Coefficients& c) {
  std::vector<int64_t> position(static_cast<size_t>(num_rows), -1);  // [row] -> k, or -1
  const int64_t* rows = grad.rows.data_ptr<int64_t>();
  for (int64_t k = 0; k < grad.rows.numel(); ++k) position[static_cast<size_t>(rows[k])] = k;
  const float* sum = grad.sum.data_ptr<float>();
  const float* sum_sq = grad.sum_sq.defined() ? grad.sum_sq.data_ptr<float>() : nullptr;
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(width, 1));
  at::parallel_for(0, num_rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t k = position[static_cast<size_t>(r)];
      const int64_t at = r * width;
      adam_span(w + at, k < 0 ? nullptr : sum + k * width,
                k < 0 || sum_sq == nullptr ? nullptr : sum_sq + k * width, m + at, v + at, width,
                c);
    }
  });
}

bool fusable(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() &&
         t.layout() == at::kStrided;
}

// The update's scalars in float, for the fused CPU kernels.
Coefficients make_coefficients(const AdamWeightDecayOptions& o, bool decay, double lr,
                               double grad_scale = 1.0) {
  return Coefficients{static_cast<float>(o.adam.beta_1),
                      static_cast<float>(1.0 - o.adam.beta_1),
                      static_cast<float>(o.adam.beta_2),
                      static_cast<float>(1.0 - o.adam.beta_2),
                      static_cast<float>(o.adam.epsilon),
                      static_cast<float>(decay ? o.adam.weight_decay_rate : 0.0),
                      static_cast<float>(lr),
                      static_cast<float>(grad_scale)};
}

// Sums duplicate rows: unique rows with the sum of their values.
std::pair<at::Tensor, at::Tensor> sum_duplicates(const at::Tensor& indices,
                                                 const at::Tensor& values,
                                                 const std::vector<int64_t>& shape) {
  at::Tensor sparse = at::_sparse_coo_tensor_unsafe(indices.unsqueeze(0), values, shape).coalesce();
  return {sparse._indices().select(0, 0), sparse._values()};
}

}  // namespace

std::vector<OptionDecl> AdamWeightDecayOptions::declarations() {
  std::vector<OptionDecl> decls = AdamWeightDecayOptions().common_declarations();
  decls.push_back(string_option("sparse_update", "dense",
                                "sparse gradients: densified (dense) or scatter-added per "
                                "duplicate row, reproducing a published bug (scatter_duplicates)")
                      .one_of({"dense", "scatter_duplicates"}));
  return decls;
}

AdamWeightDecayOptions AdamWeightDecayOptions::from_config(const ConfigView& view) {
  AdamWeightDecayOptions o;
  o.read_common(view);
  o.sparse_update = parse_sparse_update(view.get_string("sparse_update"));
  o.validate();
  return o;
}

void AdamWeightDecayOptions::validate() const { validate_common(); }

AdamWeightDecay::AdamWeightDecay(AdamWeightDecayOptions options) : options_(std::move(options)) {
  options_.validate();
}

bool AdamWeightDecay::uses_weight_decay(const std::string& name) const {
  return options_.exclusion.decays(name, options_.adam.weight_decay_rate);
}

void AdamWeightDecay::init(const std::vector<NamedTensor>& parameters,
                           const OptimizerContext& ctx) {
  schedule_ = Schedule(options_.schedule, ctx.num_train_steps);
  slots_.clear();
  index_.clear();
  c10::NoGradGuard no_grad;
  for (const auto& p : parameters) {
    BERTLAB_CHECK(p.tensor.defined(), "adam_weight_decay: parameter {} is undefined", p.name);
    BERTLAB_CHECK(index_.emplace(p.name, slots_.size()).second,
                  "adam_weight_decay: parameter {} is listed twice", p.name);
    Slot slot;
    slot.name = p.name;
    slot.param = p.tensor;
    slot.m = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
    slot.v = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
    slot.decay = uses_weight_decay(p.name);
    slots_.push_back(std::move(slot));
  }
  log_info("train", "adam_weight_decay: {} parameters, {} steps, {}", slots_.size(),
           schedule_.num_train_steps(), schedule_.describe());
}

std::vector<std::pair<std::string, at::Tensor>> AdamWeightDecay::state_dict() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& slot : slots_) {
    out.emplace_back(slot.name + "/adam_m", slot.m.detach().to(at::kCPU).clone());
    out.emplace_back(slot.name + "/adam_v", slot.v.detach().to(at::kCPU).clone());
  }
  return out;
}

void AdamWeightDecay::load_state_dict(
    const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::vector<SlotRef> targets;
  for (auto& slot : slots_) {
    targets.push_back({slot.name + "/adam_m", &slot.m});
    targets.push_back({slot.name + "/adam_v", &slot.v});
  }
  load_slots(state, targets, "adam_weight_decay");
}

double AdamWeightDecay::learning_rate(int64_t step) const { return schedule_.at(step); }

std::pair<at::Tensor, at::Tensor> AdamWeightDecay::slots(const std::string& name) const {
  auto it = index_.find(name);
  BERTLAB_CHECK(it != index_.end(), "adam_weight_decay: no parameter named {}", name);
  return {slots_[it->second].m, slots_[it->second].v};
}

StepStats AdamWeightDecay::step(GradientSet& grads, int64_t step) {
  BERTLAB_CHECK(schedule_.num_train_steps() > 0, "adam_weight_decay: step() before init()");
  StepStats stats;
  stats.learning_rate = learning_rate(step);
  // Google clips in create_optimizer, before apply_gradients: clip_by_global_norm multiplies by
  // clip_norm / norm above the threshold. The fused CPU kernel applies that factor as it reads
  // each gradient (saving a pass over all of them); other gradients are scaled first.
  stats.grad_norm = grads.global_norm(options_.clip.mode);
  // A non-finite gradient: no update; the host reports it ([train] on_nonfinite).
  if (!std::isfinite(stats.grad_norm)) return stats;
  const double clip = options_.clip.clip_norm;
  const double factor = clip > 0 && stats.grad_norm > clip ? clip / stats.grad_norm : 1.0;

  c10::NoGradGuard no_grad;
  // A parameter without an entry is left alone, as apply_gradients skips a None gradient.
  for (auto& entry : grads.entries()) {
    auto it = index_.find(entry.name);
    BERTLAB_CHECK(it != index_.end(),
                  "adam_weight_decay: gradient for {}, which is not a parameter passed to init()",
                  entry.name);
    Slot& slot = slots_[it->second];
    BERTLAB_CHECK(slot.param.sizes().vec() == entry.shape,
                  "adam_weight_decay: gradient of {} has the wrong shape", entry.name);
    if (entry.is_sparse()) {
      if (factor != 1.0) entry.values.mul_(factor);
      update_sparse(slot, entry, stats.learning_rate);
    } else {
      update_dense(slot, entry.dense, stats.learning_rate, factor);
    }
  }
  return stats;
}

void AdamWeightDecay::update_dense(Slot& slot, at::Tensor grad, double lr,
                                   double grad_scale) const {
  const auto& o = options_;
  if (fusable(slot.param) && fusable(slot.m) && fusable(slot.v) && grad.device().is_cpu() &&
      grad.scalar_type() == at::kFloat) {
    const at::Tensor g = grad.contiguous();
    const Coefficients c = make_coefficients(o, slot.decay, lr, grad_scale);
    fused_dense(slot.param.data_ptr<float>(), g.data_ptr<float>(), slot.m.data_ptr<float>(),
                slot.v.data_ptr<float>(), slot.param.numel(), c);
    return;
  }
  // Any other device or dtype: the same arithmetic as tensor ops.
  if (grad_scale != 1.0) grad.mul_(grad_scale);
  slot.m.mul_(o.adam.beta_1).add_(grad, 1.0 - o.adam.beta_1);
  slot.v.mul_(o.adam.beta_2).addcmul_(grad, grad, 1.0 - o.adam.beta_2);
  apply_moments(slot, lr);
}

void AdamWeightDecay::apply_moments(Slot& slot, double lr) const {
  at::Tensor update = slot.m / slot.v.sqrt().add_(options_.adam.epsilon);
  if (slot.decay) update.add_(slot.param, options_.adam.weight_decay_rate);
  slot.param.add_(update, -lr);
}

void AdamWeightDecay::update_sparse(Slot& slot, const GradientEntry& grad, double lr) const {
  const auto& o = options_;
  const bool scatter = o.sparse_update == SparseUpdate::kScatterDuplicates;
  if (fusable(slot.param) && fusable(slot.m) && fusable(slot.v) && slot.param.dim() >= 1 &&
      grad.values.device().is_cpu() && grad.values.scalar_type() == at::kFloat) {
    // dense: the duplicates' sum enters m and its square v, as for the densified gradient.
    // scatter_duplicates: every stored row is added on its own, so v gains the sum of the
    // squares of a row's duplicates instead of the square of their sum.
    RowGradient rows;
    std::tie(rows.rows, rows.sum) = sum_duplicates(grad.indices, grad.values, grad.shape);
    if (scatter)
      rows.sum_sq = sum_duplicates(grad.indices, grad.values.square(), grad.shape).second;
    rows.rows = rows.rows.contiguous();
    rows.sum = rows.sum.contiguous();
    if (rows.sum_sq.defined()) rows.sum_sq = rows.sum_sq.contiguous();
    const int64_t num_rows = slot.param.size(0);
    const int64_t nnz = rows.rows.numel();
    const int64_t* r = rows.rows.data_ptr<int64_t>();
    BERTLAB_CHECK(nnz == 0 || (r[0] >= 0 && r[nnz - 1] < num_rows),
                  "adam_weight_decay: sparse gradient of {} indexes rows outside [0, {})",
                  grad.name, num_rows);
    const int64_t width = num_rows == 0 ? 0 : slot.param.numel() / num_rows;
    const Coefficients c = make_coefficients(o, slot.decay, lr);
    fused_rows(slot.param.data_ptr<float>(), slot.m.data_ptr<float>(), slot.v.data_ptr<float>(),
               num_rows, width, rows, c);
    return;
  }
  if (!scatter) {
    update_dense(slot, grad.to_dense(), lr);
    return;
  }
  // The published form of the bug: decay every row, then scatter-add each stored row.
  slot.m.mul_(o.adam.beta_1).index_add_(0, grad.indices, grad.values, 1.0 - o.adam.beta_1);
  slot.v.mul_(o.adam.beta_2).index_add_(0, grad.indices, grad.values.square(), 1.0 - o.adam.beta_2);
  apply_moments(slot, lr);
}

int64_t AdamWeightDecay::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : slots_) bytes += static_cast<int64_t>(s.m.nbytes() + s.v.nbytes());
  return bytes;
}

}  // namespace bertlab::adam_weight_decay
