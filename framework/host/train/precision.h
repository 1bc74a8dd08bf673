#pragma once
// Mixed precision for the training loop ([train] precision, loss_scaling, allow_tf32):
// autocast of the forward pass to bf16 or fp16 with fp32 master weights and optimizer state,
// and dynamic loss scaling as PyTorch's GradScaler (torch.amp) for fp16.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace bertlab {

class ConfigView;

/// The [train] precision keys, read once.
struct PrecisionOptions {
  std::string precision = "fp32";     ///< fp32 | bf16 | fp16: the dtype of autocast regions
  bool dynamic_loss_scaling = false;  ///< loss_scaling: "auto" = on for fp16 only
  double init_scale = 65536.0;        ///< the first loss scale (GradScaler's 2^16)
  double growth_factor = 2.0;         ///< scale *= this after growth_interval finite steps
  double backoff_factor = 0.5;        ///< scale *= this after a non-finite step
  int64_t growth_interval = 2000;     ///< finite steps in a row before the scale grows
  bool allow_tf32 = false;            ///< TF32 matrix products on CUDA (PyTorch's default: off)

  static PrecisionOptions from_config(const ConfigView& train);
  /// The autocast dtype; Float for fp32 (no autocast).
  c10::ScalarType autocast_dtype() const;
};

/// Autocast on this thread for `device`'s type while the scope lives (a forward pass): the
/// matrix products run in `dtype`, the reductions and losses in fp32, as torch.autocast. No-op
/// for Float. Autocast state is per thread: each rank thread opens its own.
class AutocastScope {
 public:
  AutocastScope(c10::ScalarType dtype, c10::Device device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_type_;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

/// TF32 for fp32 matrix products on CUDA (torch.backends.cuda.matmul.allow_tf32).
void set_tf32(bool allow);

/// Dynamic loss scaling, as torch.amp.GradScaler: the loss is multiplied by scale() before
/// backward and the averaged gradient divided by it; a step whose gradient is not finite is
/// skipped and the scale multiplied by backoff_factor; growth_interval finite steps in a row
/// multiply it by growth_factor. Every rank holds the same averaged gradient, so every rank's
/// scaler stays the same.
class LossScaler {
 public:
  explicit LossScaler(const PrecisionOptions& options);
  bool enabled() const { return enabled_; }
  /// The factor of this step's loss (1 when disabled).
  double scale() const { return enabled_ ? scale_ : 1.0; }
  /// After a step: `finite` says whether its gradient was finite.
  void update(bool finite);
  /// Finite steps since the last change of the scale (for checkpoints).
  int64_t growth_tracker() const { return growth_tracker_; }
  /// Restores the state a checkpoint recorded.
  void restore(double scale, int64_t growth_tracker);

 private:
  bool enabled_;
  double scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t growth_tracker_ = 0;
};

}  // namespace bertlab
