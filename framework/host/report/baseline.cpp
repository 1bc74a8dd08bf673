// gradcheck's regression baselines: the tolerance rule, the file, the comparison (baseline.h).

#include "report/baseline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/machine.h"

namespace bertlab {

namespace {

constexpr int kFormat = 2;
/// What the baseline allows a step its contract does not bound (exact_until's later steps),
/// beyond float32 summation order: the digits of a deterministic algorithm (PowerSGD's
/// orthogonalisation, local SGD's own steps) moved by rounding, amplified at most 1000×.
constexpr double kUnboundedRtol = 1e-3;

/// The tolerance of one field: |now − baseline| <= atol + rtol·|baseline|.
struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
  std::string rule;  ///< exact | bounded | unbounded | not compared
  std::string why;   ///< not compared: why
};

nlohmann::ordered_json to_json(const Tolerance& t) {
  nlohmann::ordered_json j;
  j["rule"] = t.rule;
  if (t.rule == "not compared") {
    j["why"] = t.why;
  } else {
    j["rtol"] = t.rtol;
    j["atol"] = t.atol;
  }
  return j;
}

Tolerance from_json(const nlohmann::json& j, const Tolerance& fallback) {
  if (!j.is_object()) return fallback;
  Tolerance t;
  t.rule = j.value("rule", std::string("exact"));
  t.why = j.value("why", std::string());
  t.rtol = j.value("rtol", 0.0);
  t.atol = j.value("atol", 0.0);
  return t;
}

const char* const kChecksumWhy =
    "a sum over every parameter: the contract bounds each element's update, and those bounds "
    "add up to more than the checksum can tell apart; update_norm stands for the parameters";

/// Per field, the tolerance the variant's promise allows (docs/strategy-contracts.md,
/// "Regression baselines").
nlohmann::ordered_json tolerances(const BaselineRun& r) {
  const Tolerance exact{r.rtol, r.atol, "exact", ""};
  const Tolerance not_compared{0, 0, "not compared", kChecksumWhy};
  const size_t steps = r.grad_norms.size();
  std::vector<Tolerance> grads(steps, exact), losses(r.losses.size(), exact);
  Tolerance update = exact, checksum = exact;
  const BaselineContract& c = r.contract;
  if (c.kind == "bounded") {
    // Two runs that each keep |r − m| <= atol + rtol·mean|g| element-wise differ by at most
    // twice it; by the triangle inequality their norms by 2(ρ‖mean|g|‖ + α√n).
    double relative = 0.0;  // the bound over the norm it bounds, the worst step
    for (size_t k = 0; k < steps; ++k) {
      const double a = k < r.abs_mean_norms.size() ? r.abs_mean_norms[k] : 0.0;
      const double n = k < r.elements.size() ? static_cast<double>(r.elements[k]) : 0.0;
      grads[k] = {r.rtol, r.atol + 2 * (c.rtol * a + c.atol * std::sqrt(n)), "bounded", ""};
      if (r.grad_norms[k] > 0) relative = std::max(relative, a / r.grad_norms[k]);
    }
    // Downstream of the average: Adam's step is a ratio of two moments, each moved by at most
    // 2ρs, so the update by at most 4ρs; the later losses and the update norm with it.
    const double downstream = 4 * c.rtol * std::max(1.0, relative);
    for (size_t k = 1; k < losses.size(); ++k)
      losses[k] = {r.rtol + downstream, r.atol, "bounded", ""};
    update = {r.rtol + downstream, r.atol, "bounded", ""};
    checksum = not_compared;
  } else if (c.kind == "exact_until") {
    const Tolerance unbounded{r.rtol + kUnboundedRtol, r.atol, "unbounded", ""};
    const auto until = static_cast<size_t>(std::max<int64_t>(0, c.until_step));
    for (size_t k = until; k < steps; ++k) grads[k] = unbounded;
    // The loss of step k is computed before step k's update: exact through step `until`.
    for (size_t k = until + 1; k < losses.size(); ++k) losses[k] = unbounded;
    if (steps > until) {
      update = unbounded;
      checksum = not_compared;
    }
  }
  nlohmann::ordered_json j;
  for (const char* key : {"grad_norms", "losses"}) {
    auto& list = j[key] = nlohmann::ordered_json::array();
    for (const auto& t : std::string(key) == "grad_norms" ? grads : losses) {
      list.push_back(to_json(t));
    }
  }
  j["update_norm"] = to_json(update);
  j["param_sum"] = to_json(checksum);
  j["param_sum_squares"] = to_json(checksum);
  return j;
}

/// JSON keeps no infinity or NaN: a non-finite number is written as null.
nlohmann::ordered_json number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

double read_number(const nlohmann::json& j) {
  return j.is_number() ? j.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

nlohmann::ordered_json verdict_json(const BaselineVerdict& v) {
  nlohmann::ordered_json j;
  j["result"] = v.result;
  j["broken"] = v.broken;
  j["first_difference"] = v.first_difference;
  return j;
}

nlohmann::ordered_json entry(const BaselineRun& r) {
  nlohmann::ordered_json j;
  j["expect"] = r.expect;
  j["contract"] = r.contract.summary;
  // A broken run's digits are the bug's, not the code's: a differ row keeps what breaks.
  if (r.expect == "differ") {
    j["compared"] = "verdict";
    j["verdict"] = verdict_json(r.verdict);
    return j;
  }
  j["compared"] = "numbers";
  nlohmann::ordered_json norms = nlohmann::ordered_json::array();
  for (double v : r.grad_norms) norms.push_back(number(v));
  nlohmann::ordered_json losses = nlohmann::ordered_json::array();
  for (double v : r.losses) losses.push_back(number(v));
  j["grad_norms"] = norms;
  j["losses"] = losses;
  j["update_norm"] = number(r.update_norm);
  j["param_sum"] = number(r.param_sum);
  j["param_sum_squares"] = number(r.param_sum_squares);
  j["tolerance"] = tolerances(r);
  return j;
}

/// Compares one variant's numbers with its baseline entry, into `check`.
class NumberComparison {
 public:
  NumberComparison(const std::string& variant, const BaselineRun& run, BaselineCheck& check)
      : variant_(variant), run_(run), check_(check) {}

  void field(const std::string& what, double now, const nlohmann::json& old_value,
             const nlohmann::json& tolerance) {
    const Tolerance t = from_json(tolerance, Tolerance{run_.rtol, run_.atol, "exact", ""});
    if (t.rule == "not compared") return;
    const double old = read_number(old_value);
    if (!std::isfinite(now) || !std::isfinite(old)) {
      if (std::isfinite(now) != std::isfinite(old)) {
        check_.problems.push_back(
            fmt::format("variant '{}': {} is {}, baseline {}", variant_, what, now, old));
      }
      return;
    }
    const double allowed = t.atol + t.rtol * std::abs(old);
    const double diff = std::abs(now - old);
    const double use = allowed > 0 ? diff / allowed : (diff > 0 ? INFINITY : 0.0);
    auto& by_rule = check_.largest_by_rule[t.rule];
    if (use > by_rule.first || by_rule.second.empty()) {
      by_rule = {use, fmt::format("variant '{}', {}", variant_, what)};
    }
    if (use > check_.largest_use || check_.largest_at.empty()) {
      check_.largest_use = std::max(check_.largest_use, use);
      check_.largest_at = fmt::format("variant '{}', {} ({})", variant_, what, t.rule);
    }
    if (!(diff <= allowed)) {
      check_.problems.push_back(fmt::format(
          "variant '{}': {} is {:.9g}, baseline {:.9g} ({} tolerance: rtol {:.3g}, atol {:.3g}; "
          "the difference is {:.3g}× it)",
          variant_, what, now, old, t.rule, t.rtol, t.atol, use));
    }
  }

  void series(const std::string& key, const std::vector<double>& now, const nlohmann::json& old,
              const nlohmann::json& tolerance) {
    if (!old.is_array() || old.size() != now.size()) {
      check_.problems.push_back(fmt::format("variant '{}': {} has {} steps, baseline {}", variant_,
                                            key, now.size(), old.is_array() ? old.size() : 0));
      return;
    }
    for (size_t i = 0; i < now.size(); ++i) {
      const nlohmann::json t =
          tolerance.is_array() && i < tolerance.size() ? tolerance[i] : nlohmann::json();
      field(fmt::format("{}[step {}]", key, i + 1), now[i], old[i], t);
    }
  }

 private:
  const std::string& variant_;
  const BaselineRun& run_;
  BaselineCheck& check_;
};

void compare_numbers(const std::string& name, const BaselineRun& run, const nlohmann::json& old,
                     BaselineCheck& check) {
  const nlohmann::json none;
  const nlohmann::json& tol = old.contains("tolerance") ? old.at("tolerance") : none;
  const auto tolerance_of = [&](const char* key) {
    return tol.is_object() && tol.contains(key) ? tol.at(key) : none;
  };
  NumberComparison c(name, run, check);
  c.series("grad_norms", run.grad_norms, old.value("grad_norms", none), tolerance_of("grad_norms"));
  c.series("losses", run.losses, old.value("losses", none), tolerance_of("losses"));
  // A format-1 baseline has no update norm.
  if (old.contains("update_norm")) {
    c.field("update_norm", run.update_norm, old.at("update_norm"), tolerance_of("update_norm"));
  }
  c.field("param_sum", run.param_sum, old.value("param_sum", none), tolerance_of("param_sum"));
  c.field("param_sum_squares", run.param_sum_squares, old.value("param_sum_squares", none),
          tolerance_of("param_sum_squares"));
}

void compare_verdict(const std::string& name, const BaselineRun& run, const nlohmann::json& old,
                     BaselineCheck& check) {
  const nlohmann::json v = old.value("verdict", nlohmann::json::object());
  const auto describe = [](const std::string& result, const std::vector<std::string>& broken,
                           const std::string& first) {
    return fmt::format("{}, broken [{}], first difference {}", result, fmt::join(broken, ", "),
                       first.empty() ? "none" : first);
  };
  const std::string was =
      describe(v.value("result", std::string("?")), v.value("broken", std::vector<std::string>{}),
               v.value("first_difference", ""));
  const std::string is =
      describe(run.verdict.result, run.verdict.broken, run.verdict.first_difference);
  if (is != was) {
    check.problems.push_back(
        fmt::format("variant '{}' (expect differ): {}; baseline {}", name, is, was));
  }
}

}  // namespace

nlohmann::ordered_json baseline_file(const std::string& experiment, int64_t steps,
                                     const std::vector<std::string>& order,
                                     const std::map<std::string, BaselineRun>& runs) {
  nlohmann::ordered_json b;
  b["format"] = kFormat;
  b["experiment"] = experiment;
  b["steps"] = steps;
  b["rule"] =
      "per field |now - baseline| <= atol + rtol*|baseline|, the tolerances from each variant's "
      "contract (docs/strategy-contracts.md, \"Regression baselines\"); expect = \"differ\" "
      "rows by their verdict";
  b["machine"] = machine_record();
  for (const auto& name : order) b["variants"][name] = entry(runs.at(name));
  return b;
}

BaselineCheck check_baseline_file(const nlohmann::json& baseline,
                                  const std::vector<std::string>& order,
                                  const std::map<std::string, BaselineRun>& runs,
                                  const std::string& file) {
  BaselineCheck check;
  const nlohmann::json variants = baseline.value("variants", nlohmann::json::object());
  for (const auto& name : order) {
    if (!variants.contains(name)) {
      check.problems.push_back(fmt::format(
          "{}: no baseline for variant '{}' (save one with --save-baseline)", file, name));
      continue;
    }
    const BaselineRun& run = runs.at(name);
    const nlohmann::json& old = variants.at(name);
    const std::string old_expect = old.value("expect", run.expect);
    if (old_expect != run.expect) {
      check.problems.push_back(fmt::format("variant '{}': expect is \"{}\", baseline \"{}\"", name,
                                           run.expect, old_expect));
      continue;
    }
    if (old.value("compared", std::string("numbers")) == "verdict") {
      compare_verdict(name, run, old, check);
    } else {
      compare_numbers(name, run, old, check);
    }
  }
  const nlohmann::json here = machine_record();
  const nlohmann::json there = baseline.value("machine", nlohmann::json());
  check.machine = there.is_object()
                      ? machine_differences(here, there)
                      : std::vector<std::string>{
                            "the baseline records no machine (format 1; save it again with "
                            "--save-baseline)"};
  check.machine_here = machine_summary(here);
  check.machine_there = there.is_object() ? machine_summary(there) : "not recorded (format 1)";
  return check;
}

}  // namespace bertlab
