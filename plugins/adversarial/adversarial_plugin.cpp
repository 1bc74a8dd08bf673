// Adversarial training on the word embeddings' output: FGM (Miyato et al. 2017), PGD (Madry et
// al. 2018, as BERT fine-tuning uses it) and FreeLB (Zhu et al. 2020). Each perturbs only this
// replica's examples, with norms and random starts per example, so N replicas give the update of
// one device (docs/adversarial.md).

#include <ATen/ATen.h>
#include <bertlab/adversarial.h>
#include <bertlab/config.h>
#include <bertlab/plugin.h>
#include <torch/csrc/autograd/autograd.h>

#include <memory>
#include <string>
#include <vector>

namespace bertlab::adversarial {

namespace {

PerturbationNorm parse_norm(const std::string& name) {
  return name == "linf" ? PerturbationNorm::kLinf : PerturbationNorm::kL2;
}

NormScope parse_scope(const std::string& name) {
  return name == "batch" ? NormScope::kBatch : NormScope::kExample;
}

/// [examples, seq, hidden] of this replica's micro-batch.
std::vector<int64_t> perturbation_shape(const AdversarialBatch& batch) {
  return {batch.input_mask.size(0), batch.input_mask.size(1), batch.hidden_size};
}

at::Tensor zeros_for(const AdversarialBatch& batch, const std::vector<int64_t>& shape) {
  return at::zeros(shape, batch.input_mask.options().dtype(at::kFloat));
}

/// The gradient of a clean pass with respect to the embeddings' output, the parameters'
/// gradients accumulating: pass 0 with a zero perturbation that requires grad.
struct CleanPass {
  double objective = 0.0;
  at::Tensor grad;
};

CleanPass clean_pass(const AdversarialBatch& batch) {
  const at::Tensor delta = zeros_for(batch, perturbation_shape(batch)).requires_grad_(true);
  const at::Tensor objective = batch.objective(delta, 0);
  batch.backward(objective);
  return {objective.item<double>(), delta.grad().detach()};
}

// FGM: loss(x) + loss(x + ε·g/‖g‖), g the gradient of the clean loss at the embeddings' output.
class Fgm : public Adversarial {
 public:
  Fgm(double epsilon, NormScope scope) : epsilon_(epsilon), scope_(scope) {}

  double forward_backward(const AdversarialBatch& batch) override {
    const CleanPass clean = clean_pass(batch);
    const at::Tensor delta = ascent_step(at::zeros_like(clean.grad), clean.grad, epsilon_,
                                         PerturbationNorm::kL2, scope_);
    batch.backward(batch.objective(delta, 1));
    return clean.objective;
  }

 private:
  double epsilon_;
  NormScope scope_;
};

// PGD: the clean loss, then `steps` ascent steps of size α projected to the ε ball; the
// parameters take the clean gradient and the last step's (the intermediate steps move delta
// only).
class Pgd : public Adversarial {
 public:
  Pgd(int64_t steps, double alpha, double epsilon, PerturbationNorm norm, NormScope scope)
      : steps_(steps), alpha_(alpha), epsilon_(epsilon), norm_(norm), scope_(scope) {}

  double forward_backward(const AdversarialBatch& batch) override {
    const CleanPass clean = clean_pass(batch);
    at::Tensor grad = clean.grad;
    at::Tensor delta = at::zeros_like(grad);
    for (int64_t t = 1; t <= steps_; ++t) {
      delta = project_perturbation(ascent_step(delta, grad, alpha_, norm_, scope_), norm_, epsilon_)
                  .detach();
      if (t == steps_) {
        batch.backward(batch.objective(delta, t));
        break;
      }
      delta.requires_grad_(true);
      const at::Tensor objective = batch.objective(delta, t);
      grad = torch::autograd::grad({objective}, {delta})[0].detach();
      delta = delta.detach();
    }
    return clean.objective;
  }

 private:
  int64_t steps_;
  double alpha_, epsilon_;
  PerturbationNorm norm_;
  NormScope scope_;
};

// FreeLB: a random start in the ball, `steps` passes each adding its loss / steps to the
// parameters' gradients, delta ascending between them (zhuchen03/FreeLB's order: backward,
// normalize the gradient, step, project), every pass with the same dropout masks (FreeLB's
// dp_masks) unless asked otherwise.
class FreeLb : public Adversarial {
 public:
  struct Options {
    int64_t steps = 3;
    double alpha = 0.1, epsilon = 0.0, init_magnitude = 0.0;
    PerturbationNorm norm = PerturbationNorm::kL2;
    NormScope scope = NormScope::kExample;
    bool global_batch_init = false;
    bool shared_dropout_masks = true;  ///< every pass with pass 0's masks, as FreeLB's dp_masks
  };
  explicit FreeLb(const Options& o) : o_(o) {}

  double forward_backward(const AdversarialBatch& batch) override {
    std::vector<int64_t> shape = perturbation_shape(batch);
    at::Tensor delta;
    if (o_.global_batch_init) {
      // unif's mistake: the perturbation sized for the whole step's batch on every replica.
      shape[0] = batch.global_batch;
      delta = zeros_for(batch, shape);
    } else if (o_.init_magnitude > 0) {
      delta = random_perturbation(batch.key, shape, batch.input_mask, o_.norm, o_.init_magnitude);
    } else {
      delta = zeros_for(batch, shape);
    }
    double total = 0.0;
    for (int64_t t = 0; t < o_.steps; ++t) {
      delta = delta.detach().requires_grad_(true);
      const at::Tensor objective =
          batch.objective(delta, o_.shared_dropout_masks ? 0 : t) / static_cast<double>(o_.steps);
      batch.backward(objective);
      total += objective.item<double>();
      if (t + 1 == o_.steps) break;
      const at::Tensor grad = delta.grad().detach();
      delta = project_perturbation(ascent_step(delta.detach(), grad, o_.alpha, o_.norm, o_.scope),
                                   o_.norm, o_.epsilon);
    }
    return total;
  }

 private:
  Options o_;
};

OptionDecl norm_scope_option() {
  return string_option("norm_scope", "example",
                       "example: each example's step normalized by its own gradient's norm (the "
                       "update does not depend on the replicas); batch: one norm over the "
                       "replica's whole batch, as unif (an emulation: the step depends on the "
                       "split)")
      .one_of({"example", "batch"});
}

OptionDecl norm_option() {
  return string_option("norm", "l2", "the ball and the step's normalization: l2 or linf")
      .one_of({"l2", "linf"});
}

OptionDecl steps_option(const std::string& doc) { return int_option("steps", 3, doc).at_least(1); }

void register_components(Registry& registry) {
  registry.add_adversarial(
      ComponentSpec{
          "fgm",
          "FGM (Miyato et al. 2017): loss on the clean input plus on the word "
          "embeddings' output moved by epsilon · g / ||g||_2, per example",
          {float_option("epsilon", 1.0, "the perturbation's l2 norm per example").above(0),
           norm_scope_option()},
          {}},
      [](const ConfigView& view) {
        return std::make_unique<Fgm>(view.get_float("epsilon"),
                                     parse_scope(view.get_string("norm_scope")));
      });
  registry.add_adversarial(
      ComponentSpec{"pgd",
                    "PGD (Madry et al. 2018, as used for BERT fine-tuning): the clean loss plus "
                    "the loss after `steps` ascent steps of size alpha projected to the epsilon "
                    "ball, per example",
                    {steps_option("ascent steps (forward and backward passes besides the clean "
                                  "one)"),
                     float_option("alpha", 0.3, "each ascent step's size").above(0),
                     float_option("epsilon", 1.0, "the ball's radius per example").above(0),
                     norm_option(), norm_scope_option()},
                    {}},
      [](const ConfigView& view) {
        return std::make_unique<Pgd>(view.get_int("steps"), view.get_float("alpha"),
                                     view.get_float("epsilon"), parse_norm(view.get_string("norm")),
                                     parse_scope(view.get_string("norm_scope")));
      });
  registry.add_adversarial(
      ComponentSpec{
          "freelb",
          "FreeLB (Zhu et al. 2020): a random start in the ball, `steps` passes whose parameter "
          "gradients are averaged, delta ascending between them; per example",
          {steps_option("passes (FreeLB's adv-K): forward and backward on the perturbed input"),
           float_option("alpha", 0.1, "each ascent step's size (adv-lr)").above(0),
           float_option("epsilon", 0.0,
                        "the ball's radius per example (adv-max-norm); 0: unbounded")
               .at_least(0),
           float_option("init_magnitude", 0.0,
                        "the random start's size (adv-init-mag): l2, uniform(-1, 1) · "
                        "magnitude / sqrt(length · hidden) per example; linf, uniform(-m, m); 0: "
                        "start at zero")
               .at_least(0),
           norm_option(), norm_scope_option(),
           string_option("dropout_masks", "shared",
                         "shared: every pass uses the first pass's dropout masks, as FreeLB "
                         "(needs [model] dropout_rng = \"per_example\"; per replica, each pass "
                         "draws anew); per_pass: each pass its own")
               .one_of({"shared", "per_pass"}),
           string_option("emulate", "none",
                         "reproduce a published mistake: global_batch_init (the perturbation "
                         "sized for the global batch on every replica, as unif: a "
                         "configuration error with more than one replica)")
               .one_of({"none", "global_batch_init"})},
          {}},
      [](const ConfigView& view) {
        FreeLb::Options o;
        o.steps = view.get_int("steps");
        o.alpha = view.get_float("alpha");
        o.epsilon = view.get_float("epsilon");
        o.init_magnitude = view.get_float("init_magnitude");
        o.norm = parse_norm(view.get_string("norm"));
        o.scope = parse_scope(view.get_string("norm_scope"));
        o.global_batch_init = view.get_string("emulate") == "global_batch_init";
        o.shared_dropout_masks = view.get_string("dropout_masks") == "shared";
        return std::make_unique<FreeLb>(o);
      });
}

}  // namespace

}  // namespace bertlab::adversarial

BERTLAB_PLUGIN("adversarial", "0.1.0", bertlab::adversarial::register_components)
