// `bertlab gradcheck`: runs the variants on the same weights and batches and compares their
// gradients and parameters with the reference variant's.

#include "commands/gradcheck.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/log.h>
#include <bertlab/strategy.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "commands/commands.h"
#include "report/baseline.h"
#include "report/report.h"
#include "report/svg_plot.h"
#include "runtime/plugin_host.h"
#include "runtime/process_rank.h"
#include "train/runner.h"

namespace bertlab {

namespace fs = std::filesystem;

namespace {

/// What one variant did: per step its averaged gradient (dense form) and loss, then its
/// parameters.
struct Trace {
  std::vector<std::map<std::string, at::Tensor>> grads;  // [step] name → dense gradient
  std::set<std::string> sparse_names;                    // parameters with sparse gradients
  std::vector<double> losses;                            // [step]
  std::map<std::string, at::Tensor> initial;             // name → before the first step
  std::map<std::string, at::Tensor> params;
  std::vector<std::map<std::string, at::Tensor>> step_params;  // [step] name → after the update
  std::vector<ContractMeasures> measures;  // [step] the contract's measures (with a contract)
  std::string stopped;                     // why training stopped early (a non-finite step)
};

/// The contract the variant's strategy declares for its options and replicas, if any.
std::optional<StrategyContract> contract_of(const ResolvedVariant& v) {
  const ContractFn& fn = v.strategy.component->spec.contract;
  if (!fn) return std::nullopt;
  return fn(v.strategy.options, static_cast<int>(v.strategy_host.get_int("replicas")));
}

/// A training error that ends the variant but not the check (every rank raises it alike): a
/// non-finite step, for one. Configuration, data, communication errors and signals end it.
bool ends_variant_only(const Error& e) {
  return dynamic_cast<const ConfigError*>(&e) == nullptr &&
         dynamic_cast<const PluginError*>(&e) == nullptr &&
         dynamic_cast<const DataError*>(&e) == nullptr &&
         dynamic_cast<const CommError*>(&e) == nullptr &&
         dynamic_cast<const Interrupted*>(&e) == nullptr;
}

Trace record(const ResolvedExperiment& experiment, const ResolvedVariant& variant, int64_t steps,
             std::optional<uint64_t> perturb_ulp_seed) {
  Trace trace;
  RunHooks hooks;
  hooks.max_steps = steps;
  hooks.perturb_ulp_seed = perturb_ulp_seed;
  hooks.on_initial_parameters = [&](const std::vector<NamedTensor>& parameters) {
    for (const auto& p : parameters) {
      trace.initial[p.name] = p.tensor.detach().to(at::kCPU, at::kDouble).clone();
    }
  };
  hooks.probe_contract = true;
  hooks.on_contract = [&](int64_t, const ContractMeasures& m) { trace.measures.push_back(m); };
  hooks.on_averaged = [&](int64_t, const GradientSet& grads) {
    std::map<std::string, at::Tensor> step;
    for (const auto& e : grads.entries()) {
      if (e.is_sparse()) trace.sparse_names.insert(e.name);
      step[e.name] = e.to_dense().detach().to(at::kCPU, at::kDouble).clone();
    }
    trace.grads.push_back(std::move(step));
  };
  hooks.on_loss = [&](int64_t, double loss) { trace.losses.push_back(loss); };
  // For report.html's plots; the models gradcheck runs are small.
  hooks.on_parameters = [&](int64_t, const std::vector<NamedTensor>& parameters) {
    std::map<std::string, at::Tensor> step;
    for (const auto& p : parameters) {
      step[p.name] = p.tensor.detach().to(at::kCPU, at::kDouble).clone();
    }
    trace.step_params.push_back(std::move(step));
  };
  try {
    VariantResult result = run_variant(experiment, variant, hooks);
    for (const auto& [name, t] : result.final_parameters) trace.params[name] = t.to(at::kDouble);
  } catch (const Error& e) {
    if (!ends_variant_only(e)) throw;
    trace.stopped = e.what();
    log_info("gradcheck", "variant '{}' stopped: {}", variant.name, trace.stopped);
  }
  return trace;
}

/// Largest differences between two sets of tensors with the same names.
struct Difference {
  double max_abs = 0.0;
  double max_ref = 0.0;  ///< max|b| over every tensor compared
  double max_rel = 0.0;  ///< max|a-b| / max|b|, both over every tensor compared
  std::string where;     ///< the tensor with the largest absolute difference
  bool close = true;     ///< every element: |a-b| <= atol + rtol*|b|
};

void accumulate(Difference& d, const std::string& name, const at::Tensor& a, const at::Tensor& b,
                double rtol, double atol) {
  BERTLAB_CHECK(a.sizes().equals(b.sizes()),
                "gradcheck: {} has {} elements here and {} in the reference", name, a.numel(),
                b.numel());
  const at::Tensor diff = (a - b).abs();
  const double abs = diff.max().item<double>();
  const double scale = b.abs().max().item<double>();
  if (d.where.empty() || abs > d.max_abs) {
    d.max_abs = abs;
    d.where = name;
  }
  d.max_ref = std::max(d.max_ref, scale);
  d.max_rel = d.max_ref > 0 ? d.max_abs / d.max_ref : (d.max_abs > 0 ? INFINITY : 0.0);
  d.close = d.close && (diff <= atol + rtol * b.abs()).all().item<bool>();
}

/// How a variant splits the step's global batch: replicas × micro-batches.
struct Split {
  int64_t replicas = 1;
  int64_t accumulation = 1;
  bool operator==(const Split& o) const {
    return replicas == o.replicas && accumulation == o.accumulation;
  }
};

Split split_of(const ResolvedVariant& v) {
  return {v.strategy_host.get_int("replicas"), v.train.get_int("gradient_accumulation_steps")};
}

std::string describe_split(const Split& s) {
  std::string out = fmt::format("{} replica{}", s.replicas, s.replicas == 1 ? "" : "s");
  if (s.accumulation > 1) out += fmt::format(" × {} micro-batches", s.accumulation);
  return out;
}

/// The effective value of every declared key of a section.
std::map<std::string, std::string> effective(const ConfigView& view) {
  std::map<std::string, std::string> out;
  for (const auto& d : view.declarations()) {
    auto it = view.values().find(d.key);
    if (it != view.values().end()) {
      out[d.key] = format_value(it->second);
    } else if (d.default_value) {
      out[d.key] = format_value(*d.default_value);
    }
  }
  return out;
}

/// "section.key a vs b" for the keys whose values differ.
void differing_keys(const std::string& section, const std::map<std::string, std::string>& mine,
                    const std::map<std::string, std::string>& theirs,
                    const std::set<std::string>& skip, std::vector<std::string>& out) {
  std::set<std::string> keys;
  for (const auto& [k, v] : mine) keys.insert(k);
  for (const auto& [k, v] : theirs) keys.insert(k);
  for (const auto& k : keys) {
    if (skip.count(k) != 0) continue;
    const auto a = mine.find(k);
    const auto b = theirs.find(k);
    const std::string va = a == mine.end() ? "(unset)" : a->second;
    const std::string vb = b == theirs.end() ? "(unset)" : b->second;
    if (va != vb) out.push_back(fmt::format("{}.{} = {} (reference {})", section, k, va, vb));
  }
}

/// What besides gradient averaging makes `v` compute another update than the reference: the
/// likely causes of a difference, most likely first. Empty when only the averaging differs.
std::vector<std::string> causes_of_difference(const ResolvedVariant& v,
                                              const ResolvedVariant& ref) {
  std::vector<std::string> causes;
  if (&v == &ref || v.name == ref.name) return causes;
  const Split mine = split_of(v);
  const Split theirs = split_of(ref);
  // Dropout drawn per replica: an example's masks depend on who computes it.
  for (const ResolvedVariant* side : {&v, &ref}) {
    const double p = std::max(side->bert_config.hidden_dropout_prob,
                              side->bert_config.attention_probs_dropout_prob);
    if (side->model.get_string("dropout_rng") == "replica" && p > 0 && !(mine == theirs)) {
      causes.push_back(fmt::format(
          "dropout_rng = \"replica\" with dropout {}{}: masks differ by replica count ({} vs "
          "{}); use \"per_example\"",
          format_value(p), side == &ref ? " in the reference" : "", describe_split(mine),
          describe_split(theirs)));
      break;
    }
  }
  if (v.train.get_string("precision") != ref.train.get_string("precision")) {
    causes.push_back(fmt::format("precision {} (reference {})", v.train.get_string("precision"),
                                 ref.train.get_string("precision")));
  }
  if (v.experiment.get_int("seed") != ref.experiment.get_int("seed")) {
    causes.push_back(
        fmt::format("seed {} (reference {}): other initialization, data order and dropout masks",
                    v.experiment.get_int("seed"), ref.experiment.get_int("seed")));
  }
  const int64_t batch = v.train.get_int("train_batch_size") * mine.accumulation;
  const int64_t ref_batch = ref.train.get_int("train_batch_size") * theirs.accumulation;
  if (batch != ref_batch) {
    causes.push_back(fmt::format("global batch {} examples (reference {})", batch, ref_batch));
  }
  // A loss normalized over each replica's own share (pretraining's masked LM per replica)
  // depends on how the batch is split.
  for (const ResolvedVariant* side : {&v, &ref}) {
    if (side->strategy_host.get_string("loss_normalization") == "per_replica" &&
        !(mine == theirs)) {
      causes.push_back(fmt::format(
          "loss_normalization = \"per_replica\"{}: a token-weighted loss (the masked LM) is "
          "normalized by each replica's own tokens, so the split ({} vs {}) changes it",
          side == &ref ? " in the reference" : "", describe_split(mine), describe_split(theirs)));
      break;
    }
  }
  // Anything else that changes the computation.
  std::vector<std::string> other;
  {
    std::map<std::string, std::string> a, b;
    const nlohmann::json mine_json = nlohmann::json::parse(v.bert_config.to_json());
    const nlohmann::json theirs_json = nlohmann::json::parse(ref.bert_config.to_json());
    for (const auto& [k, val] : mine_json.items()) a[k] = val.dump();
    for (const auto& [k, val] : theirs_json.items()) b[k] = val.dump();
    differing_keys("model", a, b, {}, other);
  }
  differing_keys("model", effective(v.model), effective(ref.model),
                 {"dropout_rng", "sparse_embeddings"}, other);
  if (v.task.plugin != ref.task.plugin) {
    other.push_back(fmt::format("task {} (reference {})", v.task.plugin, ref.task.plugin));
  } else {
    differing_keys("task", effective(v.task.options), effective(ref.task.options), {}, other);
  }
  if (v.optimizer.plugin != ref.optimizer.plugin) {
    other.push_back(
        fmt::format("optimizer {} (reference {})", v.optimizer.plugin, ref.optimizer.plugin));
  } else {
    differing_keys("optimizer", effective(v.optimizer.options), effective(ref.optimizer.options),
                   {}, other);
  }
  if (v.adversarial.plugin != ref.adversarial.plugin) {
    other.push_back(fmt::format("adversarial {} (reference {})",
                                v.adversarial.plugin.empty() ? "none" : v.adversarial.plugin,
                                ref.adversarial.plugin.empty() ? "none" : ref.adversarial.plugin));
  } else if (v.adversarial.component != nullptr) {
    differing_keys("adversarial", effective(v.adversarial.options),
                   effective(ref.adversarial.options), {}, other);
  }
  causes.insert(causes.end(), other.begin(), other.end());
  return causes;
}

/// Whether a variant kept its strategy's contract, and what was measured.
struct ContractCheck {
  bool holds = false;
  std::vector<std::string> measured;  ///< "bound used 0.31", "error feedback 2.1e-08", ...
  std::vector<std::string> broken;    ///< what did not hold, one phrase each
  /// The parts broken, one code each (bound, until, error_feedback, sync, state, stopped,
  /// reference): what a baseline keeps of a `differ` row.
  std::vector<std::string> parts;
  double bound_ratio = NAN;      ///< kBounded: worst |r − m| / (atol + rtol·mean|g|)
  double error_feedback = NAN;   ///< worst relative conservation miss
  double sync_difference = NAN;  ///< worst parameter difference right after a sync
  /// optimizer_state_sharded: worst |state held − total/N| over the largest parameter's state
  double state_share = NAN;
};

struct Row {
  std::string variant;
  std::string expect;
  std::optional<StrategyContract> contract;
  ContractCheck check;
  Difference dense_grad, sparse_grad, params;
  Difference until_grad;            ///< kExactUntil: the gradients of the steps before until_step
  double embedding_ratio = NAN;     ///< ||g_emb|| / ||g_emb of the reference|| at step 1
  std::vector<std::string> causes;  ///< besides averaging, what makes it differ (likeliest first)
  std::string stopped;              ///< the error that ended the variant's training early
  std::string first_difference;     ///< "step S: dense gradient" ... ("" when none)
  bool match = false;
  bool pass = false;
};

std::string sci(double v) {
  if (std::isnan(v)) return "n/a";
  return fmt::format("{:.2e}", v);
}

/// The worst of `field` over the steps (NaN wins; NaN when no step has a value).
template <typename F>
double worst_over(const std::vector<ContractMeasures>& steps, F field) {
  double worst = NAN;
  for (const auto& m : steps) {
    const double v = field(m);
    if (std::isnan(v)) return v;
    if (std::isnan(worst) || v > worst) worst = v;
  }
  return worst;
}

/// Records a part of the contract `check` found broken: its code and what happened.
void broke(ContractCheck& check, const std::string& part, std::string phrase) {
  check.broken.push_back(std::move(phrase));
  if (std::find(check.parts.begin(), check.parts.end(), part) == check.parts.end()) {
    check.parts.push_back(part);
  }
}

/// The invariants' measures of `t` against `c` into `check`.
void check_invariants(const StrategyContract& c, const Trace& t, ContractCheck& check) {
  if (c.claims(Invariant::kErrorFeedbackConserves)) {
    int64_t reported = 0;
    for (const auto& m : t.measures) reported = std::max(reported, m.error_feedback_entries);
    check.error_feedback =
        worst_over(t.measures, [](const ContractMeasures& m) { return m.error_feedback; });
    check.measured.push_back(fmt::format("error feedback {}", sci(check.error_feedback)));
    if (reported == 0) {
      broke(check, "error_feedback",
            "the strategy reported no error feedback (last_error_feedback)");
    } else if (!(check.error_feedback <= 1e-6)) {
      broke(check, "error_feedback",
            fmt::format("error feedback not conserved: g + residual − sent − new residual is {} of "
                        "g + residual",
                        sci(check.error_feedback)));
    }
  }
  if (c.claims(Invariant::kReplicasEqualAfterSync)) {
    int64_t syncs = 0;
    double worst = 0.0;
    for (const auto& m : t.measures) {
      if (!m.synced) continue;
      ++syncs;
      if (std::isnan(m.sync_difference) || m.sync_difference > worst) worst = m.sync_difference;
    }
    check.sync_difference = syncs > 0 ? worst : NAN;
    check.measured.push_back(fmt::format("{} syncs, parameter difference {}", syncs, sci(worst)));
    if (syncs == 0) {
      broke(check, "sync", "no synchronisation in the steps run; run more --steps");
    } else if (!(worst == 0.0)) {
      broke(check, "sync",
            fmt::format("replicas differ by {} right after a synchronisation", sci(worst)));
    }
  }
  if (c.claims(Invariant::kOptimizerStateSharded)) {
    check.state_share =
        worst_over(t.measures, [](const ContractMeasures& m) { return m.state_share; });
    int64_t shared = 0, most = 0, total = 0, largest = 0;
    for (const auto& m : t.measures) {
      shared = std::max(shared, m.state_shared_parameters);
      most = std::max(most, m.state_elements_max);
      total = std::max(total, m.state_elements_total);
      largest = std::max(largest, m.state_elements_largest);
    }
    check.measured.push_back(
        fmt::format("optimizer state on a rank at most {} of {} elements (largest parameter's {})",
                    most, total, largest));
    if (t.measures.empty()) {
      broke(check, "state", "the optimizer state was not measured (no step ran)");
    } else if (shared > 0) {
      broke(check, "state",
            fmt::format("the optimizer state of {} parameters is held by more than one rank",
                        shared));
    } else if (!(check.state_share <= 1.0)) {
      broke(check, "state",
            fmt::format("a rank's optimizer state is {}× the largest parameter's away from 1/N",
                        sci(check.state_share)));
    }
  }
}

/// Checks `t` against its strategy's contract `c` (`row` holds the differences from the
/// reference already).
ContractCheck check_contract(const StrategyContract& c, const Trace& t, const Row& row,
                             size_t steps) {
  ContractCheck check;
  switch (c.kind) {
    case ContractKind::kExact:
      if (!row.match) broke(check, "reference", "differs from the reference beyond rtol/atol");
      break;
    case ContractKind::kExactUntil: {
      const auto exact_steps = std::min<size_t>(steps, static_cast<size_t>(c.until_step));
      if (exact_steps == 0) break;  // exact_until(0): no step is claimed exact
      check.measured.push_back(fmt::format(
          "{} max abs {}",
          exact_steps == 1 ? std::string("step 1") : fmt::format("steps 1–{}", exact_steps),
          sci(row.until_grad.max_abs)));
      if (!row.until_grad.close) {
        broke(check, "until",
              fmt::format("gradients before step {} differ from the reference", c.until_step + 1));
      }
      if (steps <= static_cast<size_t>(c.until_step) && !row.params.close) {
        broke(check, "until", "parameters differ from the reference");
      }
      break;
    }
    case ContractKind::kBounded:
      check.bound_ratio =
          worst_over(t.measures, [](const ContractMeasures& m) { return m.bound_ratio; });
      check.measured.push_back(fmt::format("bound used {}", sci(check.bound_ratio)));
      if (t.measures.empty() || !(check.bound_ratio <= 1.0)) {
        broke(check, "bound",
              fmt::format("the averaged gradient left its bound ({}× the allowed difference)",
                          sci(check.bound_ratio)));
      }
      break;
  }
  check_invariants(c, t, check);
  if (!t.stopped.empty()) broke(check, "stopped", "training stopped: " + t.stopped);
  check.holds = check.broken.empty();
  return check;
}

/// Whether every element of `a` is within atol + rtol·|b| of `b` (a NaN is not).
bool all_close(const at::Tensor& a, const at::Tensor& b, double rtol, double atol) {
  return ((a - b).abs() <= atol + rtol * b.abs()).all().item<bool>();
}

/// Where `t` first leaves `ref` beyond the tolerance: each step's averaged gradient (which parts
/// of it), then the parameters after that step's update; "" when it never does.
std::string first_difference(const Trace& t, const Trace& ref, const std::set<std::string>& sparse,
                             double rtol, double atol) {
  const size_t steps = std::max(t.grads.size(), ref.grads.size());
  for (size_t s = 0; s < steps; ++s) {
    if (s >= t.grads.size() || s >= ref.grads.size()) {
      return fmt::format("step {}: training stopped", s + 1);
    }
    bool dense = false, rows = false;
    for (const auto& [name, g] : t.grads[s]) {
      auto it = ref.grads[s].find(name);
      if (it != ref.grads[s].end() && !all_close(g, it->second, rtol, atol)) {
        (sparse.count(name) != 0 ? rows : dense) = true;
      }
    }
    if (dense || rows) {
      return fmt::format("step {}: {}", s + 1,
                         dense && rows ? "dense gradient, sparse gradient"
                                       : (dense ? "dense gradient" : "sparse gradient"));
    }
    if (s >= t.step_params.size() || s >= ref.step_params.size()) continue;
    for (const auto& [name, p] : t.step_params[s]) {
      auto it = ref.step_params[s].find(name);
      if (it != ref.step_params[s].end() && !all_close(p, it->second, rtol, atol)) {
        return fmt::format("step {}: parameters", s + 1);
      }
    }
  }
  return "";
}

Row compare(const std::string& name, const ResolvedVariant& variant, const Trace& t,
            const Trace& ref, std::vector<std::string> causes) {
  Row row;
  row.variant = name;
  row.expect = variant.expect;
  row.contract = contract_of(variant);
  row.causes = std::move(causes);
  row.stopped = t.stopped;
  const int64_t until = row.contract && row.contract->kind == ContractKind::kExactUntil
                            ? row.contract->until_step
                            : 0;
  std::set<std::string> sparse = t.sparse_names;
  sparse.insert(ref.sparse_names.begin(), ref.sparse_names.end());
  const size_t steps = std::min(t.grads.size(), ref.grads.size());
  for (size_t s = 0; s < steps; ++s) {
    for (const auto& [pname, g] : t.grads[s]) {
      auto it = ref.grads[s].find(pname);
      BERTLAB_CHECK(it != ref.grads[s].end(), "gradcheck: {} has no gradient in the reference",
                    pname);
      Difference& d = sparse.count(pname) ? row.sparse_grad : row.dense_grad;
      accumulate(d, pname, g, it->second, variant.rtol, variant.atol);
      if (static_cast<int64_t>(s) < until) {
        accumulate(row.until_grad, pname, g, it->second, variant.rtol, variant.atol);
      }
    }
  }
  for (const auto& [pname, p] : t.params) {
    auto it = ref.params.find(pname);
    BERTLAB_CHECK(it != ref.params.end(), "gradcheck: {} is not a parameter of the reference",
                  pname);
    accumulate(row.params, pname, p, it->second, variant.rtol, variant.atol);
  }
  if (!sparse.empty() && steps > 0) {
    const std::string& emb = *sparse.begin();
    const double mine = t.grads[0].at(emb).norm().item<double>();
    const double theirs = ref.grads[0].at(emb).norm().item<double>();
    if (theirs > 0) row.embedding_ratio = mine / theirs;
  }
  row.match = row.dense_grad.close && row.sparse_grad.close && row.params.close &&
              t.grads.size() == ref.grads.size() && t.stopped.empty();
  row.first_difference = first_difference(t, ref, sparse, variant.rtol, variant.atol);
  if (row.contract) row.check = check_contract(*row.contract, t, row, steps);
  // "differ" and "contract" judge by the contract when there is one, "match" by the reference.
  const bool kept = row.contract ? row.check.holds : row.match;
  if (variant.expect == "match") {
    row.pass = row.match;
  } else if (variant.expect == "differ") {
    row.pass = !kept;
  } else {
    row.pass = kept;
  }
  return row;
}

const std::vector<std::string>& table_header() {
  static const std::vector<std::string> kHeader = {"variant",
                                                   "expect",
                                                   "contract",
                                                   "measured",
                                                   "dense grad max abs",
                                                   "sparse grad max abs",
                                                   "grad max rel",
                                                   "param max abs",
                                                   "param max rel",
                                                   "largest at",
                                                   "embedding grad ratio",
                                                   "result"};
  return kHeader;
}

/// The contracts table's cells, a row per variant (gradcheck.md and report.html).
std::vector<std::vector<std::string>> table_cells(const std::vector<Row>& rows) {
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows) {
    const double grad_abs = std::max(r.dense_grad.max_abs, r.sparse_grad.max_abs);
    const double grad_ref = std::max(r.dense_grad.max_ref, r.sparse_grad.max_ref);
    const double grad_rel = grad_ref > 0 ? grad_abs / grad_ref : 0.0;
    std::string result = "PASS";
    if (!r.pass) {
      result = "FAIL";
      if (r.expect != "match" && r.contract && !r.check.broken.empty()) {
        result += ": " + r.check.broken.front();
      } else if (!r.causes.empty() && !r.match) {
        result += ": likely " + r.causes.front();
      }
    }
    cells.push_back(
        {r.variant, r.expect, r.contract ? r.contract->summary() : "-",
         r.check.measured.empty() ? "-" : fmt::format("{}", fmt::join(r.check.measured, "; ")),
         sci(r.dense_grad.max_abs), sci(r.sparse_grad.max_abs), sci(grad_rel),
         sci(r.params.max_abs), sci(r.params.max_rel), r.params.max_abs == 0 ? "-" : r.params.where,
         std::isnan(r.embedding_ratio) ? "n/a" : fmt::format("{:.4f}", r.embedding_ratio), result});
  }
  return cells;
}

/// The notes below the table (Markdown, one per entry).
std::vector<std::string> table_notes(const std::vector<Row>& rows) {
  std::vector<std::string> notes;
  for (const auto& r : rows) {
    if (!r.stopped.empty()) notes.push_back(fmt::format("`{}` stopped: {}", r.variant, r.stopped));
    if (r.contract && !r.check.broken.empty()) {
      notes.push_back(fmt::format("`{}` does not keep its contract ({}): {}.", r.variant,
                                  r.contract->summary(), fmt::join(r.check.broken, "; ")));
    }
    if (r.causes.empty()) continue;
    notes.push_back(fmt::format("`{}`, besides the averaging, differs from the reference in: {}.",
                                r.variant, fmt::join(r.causes, "; ")));
  }
  return notes;
}

std::string table_markdown(const ResolvedExperiment& experiment, const std::vector<Row>& rows,
                           int64_t steps) {
  std::string out = fmt::format(
      "# {}: gradcheck\n\nReference `{}`, {} steps. Gradients are the replicas' average before "
      "clipping, every step; parameters after the last step. Relative: the largest difference "
      "over the largest reference magnitude. A match: every element within atol + rtol*|ref|. "
      "`expect`: match (the reference), differ (breaks its strategy's contract, or without one "
      "differs from the reference) or contract (keeps it); docs/strategy-contracts.md.\n\n",
      experiment.name, experiment.reference, steps);
  out += fmt::format("| {} |\n", fmt::join(table_header(), " | "));
  out += "|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---|\n";
  for (const auto& row : table_cells(rows)) out += fmt::format("| {} |\n", fmt::join(row, " | "));
  const std::vector<std::string> notes = table_notes(rows);
  if (!notes.empty()) {
    out += "\nNotes:\n\n";
    for (const auto& n : notes) out += "- " + n + "\n";
  }
  return out;
}

// report.html: the table and, per variant, its differences from the reference against step.

/// Differences of zero (identical values) are drawn at this floor of the log axis.
constexpr double kPlotFloor = 1e-12;

/// The largest |a − b| over the tensors of `a` that `b` has too (NaN wins).
double max_abs_difference(const std::map<std::string, at::Tensor>& a,
                          const std::map<std::string, at::Tensor>& b) {
  double worst = 0.0;
  for (const auto& [name, t] : a) {
    const auto it = b.find(name);
    if (it == b.end() || !t.sizes().equals(it->second.sizes()) || t.numel() == 0) continue;
    const double d = (t - it->second).abs().max().item<double>();
    if (!std::isnan(worst) && (std::isnan(d) || d > worst)) worst = d;
  }
  return worst;
}

/// Per step (1, 2, ...) the largest absolute difference of `mine` from `theirs`.
PlotSeries difference_series(const std::string& name,
                             const std::vector<std::map<std::string, at::Tensor>>& mine,
                             const std::vector<std::map<std::string, at::Tensor>>& theirs) {
  PlotSeries s;
  s.name = name;
  for (size_t i = 0; i < std::min(mine.size(), theirs.size()); ++i) {
    s.x.push_back(static_cast<double>(i + 1));
    s.y.push_back(max_abs_difference(mine[i], theirs[i]));
  }
  return s;
}

/// Markdown text as HTML: escaped, `code` spans as <code>.
std::string markdown_code_html(const std::string& text) {
  std::string out;
  bool open = false;
  for (char c : xml_escape(text)) {
    if (c == '`') {
      out += open ? "</code>" : "<code>";
      open = !open;
    } else {
      out += c;
    }
  }
  return open ? out + "</code>" : out;
}

/// One variant's plot of its differences from the reference, with a caption saying how to
/// read what it shows.
std::string difference_plot_html(const std::string& name, const Trace& t, const Trace& ref,
                                 const std::string& reference) {
  const std::vector<PlotSeries> series = {
      difference_series("averaged gradient", t.grads, ref.grads),
      difference_series("parameters", t.step_params, ref.step_params)};
  PlotOptions options;
  options.title = fmt::format("{} against {}", name, reference);
  options.x_label = "step";
  options.y_label = "max |difference| (log scale)";
  options.log_y = true;
  options.y_floor = kPlotFloor;
  bool floored = false, non_finite = false;
  for (const auto& s : series) {
    for (double y : s.y) {
      non_finite = non_finite || !std::isfinite(y);
      floored = floored || y < kPlotFloor;
    }
  }
  std::string caption = fmt::format(
      "Largest absolute difference from <code>{}</code> at each step: the averaged gradient "
      "(before clipping) and the parameters after the update.",
      xml_escape(reference));
  if (floored) {
    caption += fmt::format(" Differences below {:g} (zero: identical values) are drawn at {:g}.",
                           kPlotFloor, kPlotFloor);
  }
  if (non_finite) caption += " An infinite or NaN difference is a triangle on the top edge.";
  if (!t.stopped.empty()) caption += " Training stopped early: " + xml_escape(t.stopped);
  return fmt::format("<div class=\"plot\" id=\"{}\">\n{}<p class=\"meta\">{}</p>\n</div>\n",
                     xml_escape("diff-" + name), render_line_plot(options, series), caption);
}

/// report.html: the contracts table with its notes, then a plot per variant but the reference.
std::string report_page(const ResolvedExperiment& experiment, const std::vector<Row>& rows,
                        int64_t steps, const std::map<std::string, Trace>& traces) {
  std::string out = html_page_start(experiment.name + ": bertlab gradcheck");
  out += fmt::format("<h1>{}: gradcheck</h1>\n", xml_escape(experiment.name));
  out += fmt::format(
      "<p class=\"meta\">Reference variant: <code>{}</code>, {} steps. Experiment file: "
      "<code>{}</code>. See docs/strategy-contracts.md.</p>\n",
      xml_escape(experiment.reference), steps, xml_escape(experiment.file.string()));
  out += "<h2>Contracts</h2>\n" + html_table(table_header(), table_cells(rows));
  const std::vector<std::string> notes = table_notes(rows);
  if (!notes.empty()) {
    out += "<p>Notes:</p>\n<ul>\n";
    for (const auto& n : notes) out += "<li>" + markdown_code_html(n) + "</li>\n";
    out += "</ul>\n";
  }
  out +=
      "<h2>Differences from the reference</h2>\n<p>A difference that stays near 1e-7 of the "
      "values is float32 rounding (another summation order); one that stays bounded is an "
      "approximation; one that grows step after step is another update.</p>\n";
  const Trace& ref = traces.at(experiment.reference);
  for (const auto& r : rows) {
    if (r.variant == experiment.reference) continue;
    out += difference_plot_html(r.variant, traces.at(r.variant), ref, experiment.reference);
  }
  return out + "</body>\n</html>\n";
}

nlohmann::ordered_json difference_json(const Difference& d) {
  nlohmann::ordered_json j;
  j["max_abs"] = d.max_abs;
  j["max_rel"] = std::isfinite(d.max_rel) ? nlohmann::ordered_json(d.max_rel) : nullptr;
  j["largest_at"] = d.where;
  j["close"] = d.close;
  return j;
}

/// What a baseline keeps of one variant: its numbers, its promise and its verdict.
BaselineRun baseline_run(const ResolvedVariant& v, const Row& row, const Trace& t) {
  BaselineRun r;
  r.expect = v.expect;
  r.rtol = v.rtol;
  r.atol = v.atol;
  // "match" judges by the reference, whatever the strategy declares.
  if (row.contract && v.expect != "match") {
    r.contract.kind = to_string(row.contract->kind);
    r.contract.rtol = row.contract->rtol;
    r.contract.atol = row.contract->atol;
    r.contract.until_step = row.contract->until_step;
    r.contract.summary = row.contract->summary();
  }
  for (const auto& step : t.grads) {
    double sum = 0;
    for (const auto& [name, g] : step) sum += g.pow(2).sum().item<double>();
    r.grad_norms.push_back(std::sqrt(sum));
  }
  r.losses = t.losses;
  for (const auto& m : t.measures) {
    r.abs_mean_norms.push_back(m.abs_mean_norm);
    r.elements.push_back(m.elements);
  }
  double moved = 0;
  for (const auto& [name, p] : t.params) {
    r.param_sum += p.sum().item<double>();
    r.param_sum_squares += p.pow(2).sum().item<double>();
    auto it = t.initial.find(name);
    if (it != t.initial.end()) moved += (p - it->second).pow(2).sum().item<double>();
  }
  r.update_norm = std::sqrt(moved);
  r.verdict.result = row.pass ? "PASS" : "FAIL";
  r.verdict.broken = row.contract ? row.check.parts : std::vector<std::string>{};
  if (!row.contract && !row.match) r.verdict.broken = {"reference"};
  r.verdict.first_difference = row.first_difference;
  return r;
}

/// What besides the averaging makes each variant differ from the reference (logged on rank 0).
std::map<std::string, std::vector<std::string>> log_causes(const ResolvedExperiment& experiment) {
  const ResolvedVariant* reference = nullptr;
  for (const auto& v : experiment.variants) {
    if (v.name == experiment.reference) reference = &v;
  }
  std::map<std::string, std::vector<std::string>> causes;
  if (reference == nullptr) return causes;
  for (const auto& v : experiment.variants) {
    causes[v.name] = causes_of_difference(v, *reference);
    if (!causes[v.name].empty() && !is_secondary_process()) {
      log_info("gradcheck",
               "variant '{}', besides the averaging, differs from the reference '{}' in: {}",
               v.name, reference->name, fmt::join(causes[v.name], "; "));
    }
  }
  return causes;
}

/// gradcheck.json: the experiment and each variant's differences and verdict.
nlohmann::ordered_json rows_json(const ResolvedExperiment& experiment, const std::vector<Row>& rows,
                                 int64_t steps) {
  nlohmann::ordered_json json;
  json["experiment"] = experiment.name;
  json["reference"] = experiment.reference;
  json["steps"] = steps;
  for (const auto& r : rows) {
    nlohmann::ordered_json j;
    j["expect"] = r.expect;
    if (r.contract) {
      nlohmann::ordered_json c;
      c["kind"] = to_string(r.contract->kind);
      c["summary"] = r.contract->summary();
      c["holds"] = r.check.holds;
      c["measured"] = r.check.measured;
      c["broken"] = r.check.broken;
      const auto number = [](double v) {
        return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
      };
      c["bound_ratio"] = number(r.check.bound_ratio);
      c["error_feedback"] = number(r.check.error_feedback);
      c["sync_difference"] = number(r.check.sync_difference);
      c["state_share"] = number(r.check.state_share);
      j["contract"] = c;
    }
    if (!r.stopped.empty()) j["stopped"] = r.stopped;
    j["dense_grad"] = difference_json(r.dense_grad);
    j["sparse_grad"] = difference_json(r.sparse_grad);
    j["params"] = difference_json(r.params);
    j["embedding_grad_ratio"] = std::isnan(r.embedding_ratio)
                                    ? nlohmann::ordered_json(nullptr)
                                    : nlohmann::ordered_json(r.embedding_ratio);
    j["causes"] = r.causes;
    j["match"] = r.match;
    j["result"] = r.pass ? "PASS" : "FAIL";
    json["variants"][r.variant] = j;
  }
  return json;
}

/// Writes gradcheck.md, gradcheck.json and report.html and prints the table.
void write_report(const ResolvedExperiment& experiment, const std::vector<Row>& rows, int64_t steps,
                  const std::map<std::string, Trace>& traces) {
  const fs::path dir = experiment.output_dir / experiment.name;
  const std::string md = table_markdown(experiment, rows, steps);
  write_file_atomic(dir / "gradcheck.md", md);
  write_file_atomic(dir / "gradcheck.json", rows_json(experiment, rows, steps).dump(2) + "\n");
  write_file_atomic(dir / "report.html", report_page(experiment, rows, steps, traces));
  std::cout << md << "\nWritten to " << (dir / "gradcheck.md").string() << ", "
            << (dir / "gradcheck.json").string() << " and " << (dir / "report.html").string()
            << "\n";
}

/// Whether the run's numbers match the baseline file's (printing each difference, the largest
/// use of a tolerance, and both machines when they differ).
bool check_baseline(const fs::path& file, const std::vector<std::string>& order,
                    const std::map<std::string, BaselineRun>& runs, int64_t steps) {
  std::ifstream in(file);
  BERTLAB_CHECK_AS(ConfigError, in.good(), "--baseline {}: cannot read", file.string());
  nlohmann::json baseline;
  try {
    baseline = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw ConfigError(
        fmt::format("--baseline {}: not a gradcheck baseline: {}", file.string(), e.what()));
  }
  BERTLAB_CHECK_AS(ConfigError, baseline.value("steps", int64_t{0}) == steps,
                   "--baseline {}: recorded with {} steps; run with --steps {}", file.string(),
                   baseline.value("steps", int64_t{0}), baseline.value("steps", int64_t{0}));
  const BaselineCheck check = check_baseline_file(baseline, order, runs, file.string());
  for (const auto& p : check.problems) std::cout << "baseline: " << p << "\n";
  if (check.problems.empty()) {
    std::cout << "Baseline " << file.string() << ": every variant unchanged";
  } else {
    std::cout << "Baseline " << file.string() << ": " << check.problems.size() << " difference"
              << (check.problems.size() == 1 ? "" : "s");
  }
  if (!check.largest_at.empty()) {
    std::cout << fmt::format("; largest use of a tolerance {:.3g} ({})", check.largest_use,
                             check.largest_at);
  }
  std::cout << "\n";
  for (const auto& [rule, largest] : check.largest_by_rule) {
    std::cout << fmt::format("  {} tolerances: largest use {:.3g} ({})\n", rule, largest.first,
                             largest.second);
  }
  if (!check.machine.empty()) {
    std::cout << "Baseline machine: " << check.machine_there
              << "\nThis machine:     " << check.machine_here
              << "\nThey differ in: " << fmt::format("{}", fmt::join(check.machine, "; ")) << "\n";
    if (!check.problems.empty()) {
      std::cout << "A difference within rounding of another machine fits inside the "
                   "tolerances (docs/strategy-contracts.md, \"Regression baselines\"); one "
                   "outside them is the code's, or a machine whose float results differ by more "
                   "than rounding.\n";
    }
  }
  return check.problems.empty();
}

}  // namespace

int run_gradcheck(const ResolvedExperiment& experiment, const GradcheckOptions& options) {
  BERTLAB_CHECK_AS(ConfigError, options.steps >= 1, "--steps: must be >= 1, got {}", options.steps);
  // Before training: what besides averaging can make a variant differ from the reference.
  std::map<std::string, std::vector<std::string>> causes = log_causes(experiment);
  std::map<std::string, Trace> traces;
  if (options.perturb_ulp_seed) {
    log_info("gradcheck",
             "every nonzero initial weight moved one ulp up or down (--perturb-ulp {}), as "
             "another machine's rounding would",
             *options.perturb_ulp_seed);
  }
  for (const auto& v : experiment.variants) {
    log_info("train", "gradcheck: variant '{}', {} steps", v.name, options.steps);
    traces[v.name] = record(experiment, v, options.steps, options.perturb_ulp_seed);
  }
  // Ranks other than 0 of a launched run only take part in the collectives.
  if (is_secondary_process()) return 0;
  auto ref_it = traces.find(experiment.reference);
  if (ref_it == traces.end()) {
    throw ConfigError(
        fmt::format("gradcheck: the reference variant '{}' was not selected; add "
                    "--variant {}",
                    experiment.reference, experiment.reference));
  }
  std::vector<Row> rows;
  for (const auto& v : experiment.variants) {
    rows.push_back(compare(v.name, v, traces.at(v.name), ref_it->second, causes[v.name]));
  }
  write_report(experiment, rows, options.steps, traces);

  std::vector<std::string> order;
  std::map<std::string, BaselineRun> runs;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResolvedVariant& v = experiment.variants[i];
    order.push_back(v.name);
    runs[v.name] = baseline_run(v, rows[i], traces.at(v.name));
  }
  if (options.save_baseline) {
    const auto b = baseline_file(experiment.name, options.steps, order, runs);
    write_file_atomic(*options.save_baseline, b.dump(2) + "\n");
    std::cout << "Baseline written to " << options.save_baseline->string() << "\n";
  }
  bool ok = true;
  for (const auto& r : rows) ok = ok && r.pass;
  if (options.baseline) {
    ok = check_baseline(*options.baseline, order, runs, options.steps) && ok;
  }
  return ok ? 0 : 1;
}

namespace {

struct GradcheckArgs {
  ExperimentArgs experiment;
  int64_t steps = 3;          ///< --steps
  std::string save_baseline;  ///< --save-baseline FILE
  std::string baseline;       ///< --baseline FILE
  int64_t perturb_ulp = -1;   ///< --perturb-ulp SEED; < 0: off
};

/// gradcheck compares updates, which a seed does not change the nature of: with several seeds
/// each variant is checked with the first.
void keep_first_seed(ResolvedExperiment& experiment) {
  if (experiment.seeds.size() <= 1) return;
  log_info("gradcheck", "the experiment lists {} seeds; checking each variant with seed {}",
           experiment.seeds.size(), experiment.seeds.front());
  std::vector<ResolvedVariant> first;
  for (auto& v : experiment.variants) {
    const bool seen = std::any_of(first.begin(), first.end(),
                                  [&](const ResolvedVariant& f) { return f.name == v.name; });
    if (seen) continue;
    v.repeat_seed.reset();
    first.push_back(std::move(v));
  }
  experiment.variants = std::move(first);
}

int gradcheck(const GradcheckArgs& args, const PluginOptions& plugins) {
  GradcheckOptions options;
  options.steps = args.steps;
  if (!args.save_baseline.empty()) options.save_baseline = fs::path(args.save_baseline);
  if (!args.baseline.empty()) options.baseline = fs::path(args.baseline);
  if (args.perturb_ulp >= 0) options.perturb_ulp_seed = static_cast<uint64_t>(args.perturb_ulp);
  return with_plugin_host([&](PluginHost& host) -> int {
    load_plugins(host, plugins);
    ResolvedExperiment experiment = load_experiment(host, args.experiment);
    log_versions(host);
    keep_first_seed(experiment);
    return run_gradcheck(experiment, options);
  });
}

}  // namespace

Command define_gradcheck_command(CommandLine& parent, PluginOptions& plugins) {
  auto args = std::make_shared<GradcheckArgs>();
  CommandLine command = parent.subcommand(
      "gradcheck", "compare every variant's gradients and parameters with the reference's");
  add_experiment_args(command, args->experiment, "check");
  command.option("--steps", args->steps, "optimizer steps per variant (default 3)");
  command.option("--output-dir", args->experiment.output_dir,
                 "folder for gradcheck.md, gradcheck.json and report.html");
  command.option("--save-baseline", args->save_baseline,
                 "write per-step gradient norms, losses and parameter checksums here");
  command.option("--baseline", args->baseline,
                 "fail when the numbers differ from this file beyond the tolerances it states");
  command.option("--perturb-ulp", args->perturb_ulp,
                 "move every nonzero initial weight one ulp up or down (directions drawn from "
                 "this seed), as another machine's rounding would: a baseline must still hold");
  add_plugin_options(command, plugins);
  return {command, [args, &plugins] { return gradcheck(*args, plugins); }};
}

}  // namespace bertlab
