#include <bertlab/error.h>
#include <bertlab/optimizer_options.h>

#include <c10/core/GradMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace bertlab {

namespace {

constexpr double kPi = 3.14159265358979323846;

DecayKind parse_decay(const std::string& name) {
  if (name == "linear") return DecayKind::kLinear;
  if (name == "polynomial") return DecayKind::kPolynomial;
  if (name == "cosine") return DecayKind::kCosine;
  if (name == "constant") return DecayKind::kConstant;
  throw ConfigError(fmt::format(
      "[optimizer] schedule must be one of linear|polynomial|cosine|constant, got \"{}\"", name));
}

NormMode parse_norm_mode(const std::string& name) {
  if (name == "coalesced") return NormMode::kCoalesced;
  if (name == "uncoalesced") return NormMode::kUncoalesced;
  throw ConfigError(fmt::format(
      "[optimizer] clip_norm_mode must be one of coalesced|uncoalesced, got \"{}\"", name));
}

}  // namespace

const char* to_string(DecayKind kind) {
  switch (kind) {
    case DecayKind::kLinear:
      return "linear";
    case DecayKind::kPolynomial:
      return "polynomial";
    case DecayKind::kCosine:
      return "cosine";
    case DecayKind::kConstant:
      return "constant";
  }
  return "?";
}

std::vector<OptionDecl> ScheduleOptions::declarations(double default_learning_rate,
                                                      double default_warmup_proportion,
                                                      const std::string& default_schedule) {
  const ScheduleOptions d;
  return {
      float_option("learning_rate", default_learning_rate, "peak learning rate (Google's init_lr)")
          .above(0),
      float_option("warmup_proportion", default_warmup_proportion,
                   "fraction of the training steps with linear warmup")
          .in_range(0, 1),
      int_option("num_warmup_steps", d.num_warmup_steps,
                 "warmup steps; -1: int(num_train_steps * warmup_proportion)")
          .at_least(-1),
      string_option("schedule", default_schedule,
                    "after the warmup: linear or polynomial decay from step 0 to "
                    "num_train_steps (Google's, NVIDIA's), half a cosine over the steps after "
                    "the warmup (Hugging Face's), or constant")
          .one_of({"linear", "polynomial", "cosine", "constant"}),
      float_option("power", d.power, "exponent of the polynomial schedule").above(0),
      float_option("end_learning_rate", d.end_learning_rate,
                   "the rate the linear, polynomial and cosine schedules end at")
          .at_least(0),
  };
}

ScheduleOptions ScheduleOptions::from_config(const ConfigView& view) {
  ScheduleOptions o;
  o.learning_rate = view.get_float("learning_rate");
  o.warmup_proportion = view.get_float("warmup_proportion");
  o.num_warmup_steps = view.get_int("num_warmup_steps");
  o.decay = parse_decay(view.get_string("schedule"));
  o.power = view.get_float("power");
  o.end_learning_rate = view.get_float("end_learning_rate");
  o.validate();
  return o;
}

void ScheduleOptions::validate() const {
  auto fail = [](const std::string& message) { throw ConfigError("[optimizer] " + message); };
  if (!(learning_rate > 0)) fail(fmt::format("learning_rate must be > 0, got {}", learning_rate));
  if (!(warmup_proportion >= 0 && warmup_proportion <= 1)) {
    fail(fmt::format("warmup_proportion must be in [0, 1], got {}", warmup_proportion));
  }
  if (num_warmup_steps < -1) {
    fail(fmt::format("num_warmup_steps must be >= 0, or -1 for warmup_proportion; got {}",
                     num_warmup_steps));
  }
  if (!(power > 0)) fail(fmt::format("power must be > 0, got {}", power));
  if (!(end_learning_rate >= 0 && end_learning_rate <= learning_rate)) {
    fail(fmt::format("end_learning_rate must be in [0, learning_rate = {}], got {}", learning_rate,
                     end_learning_rate));
  }
}

Schedule::Schedule(const ScheduleOptions& options, int64_t num_train_steps)
    : options_(options), num_train_steps_(num_train_steps) {
  options_.validate();
  BERTLAB_CHECK(num_train_steps_ > 0,
                "the learning-rate schedule needs num_train_steps > 0, got {}; check "
                "train_batch_size and num_train_epochs",
                num_train_steps_);
  // As run_classifier.py: int(num_train_steps * warmup_proportion), truncated.
  num_warmup_steps_ = options_.num_warmup_steps >= 0
                          ? options_.num_warmup_steps
                          : static_cast<int64_t>(static_cast<double>(num_train_steps_) *
                                                 options_.warmup_proportion);
}

double Schedule::at(int64_t step) const {
  const double lr = options_.learning_rate;
  // Google's warmup replaces the decayed rate while global_step < num_warmup_steps.
  if (num_warmup_steps_ > 0 && step < num_warmup_steps_) {
    return lr * static_cast<double>(step) / static_cast<double>(num_warmup_steps_);
  }
  const double end = options_.end_learning_rate;
  switch (options_.decay) {
    case DecayKind::kConstant:
      return lr;
    case DecayKind::kLinear:
    case DecayKind::kPolynomial: {
      // tf.train.polynomial_decay without cycling: the step clamped to num_train_steps.
      const double progress = static_cast<double>(std::min(step, num_train_steps_)) /
                              static_cast<double>(num_train_steps_);
      const double power = options_.decay == DecayKind::kLinear ? 1.0 : options_.power;
      return (lr - end) * std::pow(1.0 - progress, power) + end;
    }
    case DecayKind::kCosine: {
      // get_cosine_schedule_with_warmup (half a cycle), with an end rate.
      const int64_t span = std::max<int64_t>(1, num_train_steps_ - num_warmup_steps_);
      const double progress =
          std::min(1.0, static_cast<double>(step - num_warmup_steps_) / static_cast<double>(span));
      return end + (lr - end) * 0.5 * (1.0 + std::cos(kPi * progress));
    }
  }
  return lr;
}

std::string Schedule::describe() const {
  std::string decay;
  switch (options_.decay) {
    case DecayKind::kConstant:
      decay = "constant";
      break;
    case DecayKind::kLinear:
      decay = "linear decay";
      break;
    case DecayKind::kPolynomial:
      decay = fmt::format("polynomial decay (power {})", options_.power);
      break;
    case DecayKind::kCosine:
      decay = "cosine decay";
      break;
  }
  if (options_.decay != DecayKind::kConstant) {
    decay += fmt::format(" to {} by step {}", options_.end_learning_rate, num_train_steps_);
  }
  if (num_warmup_steps_ == 0)
    return fmt::format("peak lr {}, no warmup, {}", options_.learning_rate, decay);
  return fmt::format("peak lr {}, linear warmup over {} steps, then {}", options_.learning_rate,
                     num_warmup_steps_, decay);
}

std::vector<OptionDecl> ClipOptions::declarations(double default_clip_norm) {
  return {
      float_option("clip_norm", default_clip_norm,
                   "clip gradients to this global norm; 0: no clipping")
          .at_least(0),
      string_option("clip_norm_mode", "coalesced",
                    "sparse rows in the global norm: duplicates summed (coalesced) or as "
                    "stored, like TensorFlow's global_norm (uncoalesced)")
          .one_of({"coalesced", "uncoalesced"}),
  };
}

ClipOptions ClipOptions::from_config(const ConfigView& view) {
  ClipOptions o;
  o.clip_norm = view.get_float("clip_norm");
  o.mode = parse_norm_mode(view.get_string("clip_norm_mode"));
  if (!(o.clip_norm >= 0)) {
    throw ConfigError(fmt::format(
        "[optimizer] clip_norm must be >= 0 (0 disables clipping), got {}", o.clip_norm));
  }
  return o;
}

double ClipOptions::apply(GradientSet& grads) const {
  return clip_norm > 0 ? grads.clip_by_global_norm(clip_norm, mode) : grads.global_norm(mode);
}

std::vector<OptionDecl> AdamHyperparameters::declarations(double default_epsilon,
                                                          double default_weight_decay_rate) {
  const AdamHyperparameters d;
  return {
      float_option("weight_decay_rate", default_weight_decay_rate, "decoupled weight decay")
          .at_least(0),
      float_option("beta_1", d.beta_1, "first-moment decay").in_range(0, 1),
      float_option("beta_2", d.beta_2, "second-moment decay").in_range(0, 1),
      float_option("epsilon", default_epsilon, "added to the denominator's square root")
          .at_least(0),
  };
}

AdamHyperparameters AdamHyperparameters::from_config(const ConfigView& view) {
  AdamHyperparameters h;
  h.weight_decay_rate = view.get_float("weight_decay_rate");
  h.beta_1 = view.get_float("beta_1");
  h.beta_2 = view.get_float("beta_2");
  h.epsilon = view.get_float("epsilon");
  h.validate();
  return h;
}

void AdamHyperparameters::validate() const {
  auto fail = [](const std::string& message) { throw ConfigError("[optimizer] " + message); };
  if (!(weight_decay_rate >= 0)) {
    fail(fmt::format("weight_decay_rate must be >= 0, got {}", weight_decay_rate));
  }
  if (!(beta_1 >= 0 && beta_1 < 1)) fail(fmt::format("beta_1 must be in [0, 1), got {}", beta_1));
  if (!(beta_2 >= 0 && beta_2 < 1)) fail(fmt::format("beta_2 must be in [0, 1), got {}", beta_2));
  if (!(epsilon >= 0)) fail(fmt::format("epsilon must be >= 0, got {}", epsilon));
}

OptionDecl WeightDecayExclusion::declaration(const std::string& default_parts) {
  return string_option("exclude_from_weight_decay", default_parts,
                       "comma-separated name parts; matching parameters are not decayed");
}

WeightDecayExclusion WeightDecayExclusion::from_config(const ConfigView& view) {
  return WeightDecayExclusion{split_names(view.get_string("exclude_from_weight_decay"))};
}

bool WeightDecayExclusion::decays(const std::string& parameter_name,
                                  double weight_decay_rate) const {
  if (weight_decay_rate == 0.0) return false;
  return std::none_of(parts.begin(), parts.end(), [&](const std::string& part) {
    return parameter_name.find(part) != std::string::npos;
  });
}

std::vector<OptionDecl> AdamFamilyOptions::common_declarations() const {
  std::vector<OptionDecl> decls = ScheduleOptions::declarations(
      schedule.learning_rate, schedule.warmup_proportion, to_string(schedule.decay));
  for (auto& d : AdamHyperparameters::declarations(adam.epsilon, adam.weight_decay_rate)) {
    decls.push_back(std::move(d));
  }
  for (auto& d : ClipOptions::declarations(clip.clip_norm)) decls.push_back(std::move(d));
  std::string parts;
  for (const auto& part : exclusion.parts) parts += (parts.empty() ? "" : ",") + part;
  decls.push_back(WeightDecayExclusion::declaration(parts));
  return decls;
}

void AdamFamilyOptions::read_common(const ConfigView& view) {
  schedule = ScheduleOptions::from_config(view);
  adam = AdamHyperparameters::from_config(view);
  clip = ClipOptions::from_config(view);
  exclusion = WeightDecayExclusion::from_config(view);
}

void AdamFamilyOptions::validate_common() const {
  schedule.validate();
  adam.validate();
  if (!(clip.clip_norm >= 0)) {
    throw ConfigError(fmt::format(
        "[optimizer] clip_norm must be >= 0 (0 disables clipping), got {}", clip.clip_norm));
  }
}

void load_slots(const std::vector<std::pair<std::string, at::Tensor>>& state,
                const std::vector<SlotRef>& targets, const std::string& optimizer) {
  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, t] : state) by_name[name] = &t;
  std::unordered_map<std::string, bool> wanted;
  for (const auto& ref : targets) wanted[ref.name] = true;
  for (const auto& [name, t] : state) {
    BERTLAB_CHECK(wanted.count(name) != 0,
                  "{}: the checkpoint holds {}, which this model and optimizer do not have "
                  "(was it written by another optimizer or model?)",
                  optimizer, name);
  }
  c10::NoGradGuard no_grad;
  for (const auto& ref : targets) {
    auto it = by_name.find(ref.name);
    BERTLAB_CHECK(it != by_name.end(), "{}: the checkpoint has no slot {}", optimizer, ref.name);
    BERTLAB_CHECK(it->second->sizes().equals(ref.target->sizes()),
                  "{}: slot {} has shape [{}] in the checkpoint, [{}] here", optimizer, ref.name,
                  fmt::join(it->second->sizes(), ", "), fmt::join(ref.target->sizes(), ", "));
    ref.target->copy_(*it->second);
  }
}

void ParameterIndex::reset(const std::vector<NamedTensor>& parameters,
                           const std::string& optimizer) {
  optimizer_ = optimizer;
  names_.clear();
  shapes_.clear();
  index_.clear();
  for (const auto& p : parameters) {
    BERTLAB_CHECK(p.tensor.defined(), "{}: parameter {} is undefined", optimizer_, p.name);
    BERTLAB_CHECK(index_.emplace(p.name, names_.size()).second, "{}: parameter {} is listed twice",
                  optimizer_, p.name);
    names_.push_back(p.name);
    shapes_.push_back(p.tensor.sizes().vec());
  }
}

size_t ParameterIndex::at(const std::string& name) const {
  auto it = index_.find(name);
  BERTLAB_CHECK(it != index_.end(), "{}: {} is not a parameter passed to init()", optimizer_, name);
  return it->second;
}

size_t ParameterIndex::at(const GradientEntry& grad) const {
  const size_t i = at(grad.name);
  BERTLAB_CHECK(shapes_[i] == grad.shape,
                "{}: the gradient of {} has shape [{}], the parameter [{}]", optimizer_, grad.name,
                fmt::join(grad.shape, ", "), fmt::join(shapes_[i], ", "));
  return i;
}

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(start, comma - start);
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    if (first != std::string::npos) out.push_back(item.substr(first, last - first + 1));
    start = comma + 1;
  }
  return out;
}

}  // namespace bertlab
