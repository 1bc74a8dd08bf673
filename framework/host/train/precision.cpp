// Autocast and dynamic loss scaling for bf16/fp16 training.

#include "train/precision.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <bertlab/config.h>
#include <torch/version.h>

namespace bertlab {

namespace {

// libtorch 2.4 replaced the per-device autocast setters (set_enabled, set_cpu_enabled,
// set_autocast_gpu_dtype, ...) with ones taking the device type; the old ones are deprecated.
// Both are behind these three functions.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(c10::DeviceType type) { return at::autocast::is_autocast_enabled(type); }
c10::ScalarType autocast_dtype(c10::DeviceType type) {
  return at::autocast::get_autocast_dtype(type);
}
void set_autocast(c10::DeviceType type, bool enabled, c10::ScalarType dtype) {
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, enabled);
}
#else
bool autocast_enabled(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                       : at::autocast::is_cpu_enabled();
}
c10::ScalarType autocast_dtype(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                       : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast(c10::DeviceType type, bool enabled, c10::ScalarType dtype) {
  if (type == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
}
#endif

}  // namespace

PrecisionOptions PrecisionOptions::from_config(const ConfigView& train) {
  PrecisionOptions o;
  o.precision = train.get_string("precision");
  const std::string scaling = train.get_string("loss_scaling");
  o.dynamic_loss_scaling = scaling == "dynamic" || (scaling == "auto" && o.precision == "fp16");
  o.init_scale = train.get_float("loss_scale_init");
  o.growth_factor = train.get_float("loss_scale_growth_factor");
  o.backoff_factor = train.get_float("loss_scale_backoff_factor");
  o.growth_interval = train.get_int("loss_scale_growth_interval");
  o.allow_tf32 = train.get_bool("allow_tf32");
  return o;
}

c10::ScalarType PrecisionOptions::autocast_dtype() const {
  if (precision == "bf16") return c10::ScalarType::BFloat16;
  if (precision == "fp16") return c10::ScalarType::Half;
  return c10::ScalarType::Float;
}

AutocastScope::AutocastScope(c10::ScalarType dtype, c10::Device device)
    : device_type_(device.type()) {
  if (dtype == c10::ScalarType::Float) return;
  active_ = true;
  was_enabled_ = autocast_enabled(device_type_);
  previous_dtype_ = autocast_dtype(device_type_);
  set_autocast(device_type_, true, dtype);
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  set_autocast(device_type_, was_enabled_, previous_dtype_);
  // The casts of the weights made in the region are cached; they are stale after the update.
  if (!was_enabled_) at::autocast::clear_cache();
}

void set_tf32(bool allow) {
  // "high" is TF32 for fp32 matrix products on CUDA; "highest" is full fp32 (the default).
  at::globalContext().setFloat32MatmulPrecision(allow ? "high" : "highest");
}

LossScaler::LossScaler(const PrecisionOptions& options)
    : enabled_(options.dynamic_loss_scaling),
      scale_(options.init_scale),
      growth_factor_(options.growth_factor),
      backoff_factor_(options.backoff_factor),
      growth_interval_(options.growth_interval) {}

void LossScaler::update(bool finite) {
  if (!enabled_) return;
  if (!finite) {
    scale_ *= backoff_factor_;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == growth_interval_) {
    scale_ *= growth_factor_;
    growth_tracker_ = 0;
  }
}

void LossScaler::restore(double scale, int64_t growth_tracker) {
  scale_ = scale;
  growth_tracker_ = growth_tracker;
}

}  // namespace bertlab
