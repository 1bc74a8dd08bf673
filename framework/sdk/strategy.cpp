// Strategy contracts: names and summaries; the default state of a stateless strategy.

#include <bertlab/error.h>
#include <bertlab/strategy.h>
#include <fmt/format.h>

#include <algorithm>

namespace bertlab {

const char* to_string(ContractKind kind) {
  switch (kind) {
    case ContractKind::kExact:
      return "exact";
    case ContractKind::kBounded:
      return "bounded";
    case ContractKind::kExactUntil:
      return "exact_until";
  }
  return "?";
}

const char* to_string(Invariant invariant) {
  switch (invariant) {
    case Invariant::kErrorFeedbackConserves:
      return "error_feedback_conserves";
    case Invariant::kReplicasEqualAfterSync:
      return "replicas_equal_after_sync";
    case Invariant::kOptimizerStateSharded:
      return "optimizer_state_sharded";
  }
  return "?";
}

bool StrategyContract::claims(Invariant invariant) const {
  return std::find(invariants.begin(), invariants.end(), invariant) != invariants.end();
}

std::string StrategyContract::summary() const {
  std::string out = to_string(kind);
  if (kind == ContractKind::kBounded) {
    out += fmt::format(" (rtol {:.2e}, atol {:.2e})", rtol, atol);
  } else if (kind == ContractKind::kExactUntil) {
    out += fmt::format("(step {})", until_step);
  }
  for (const Invariant i : invariants) out += fmt::format(" + {}", to_string(i));
  return out;
}

void Strategy::load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  BERTLAB_CHECK(state.empty(),
                "the checkpoint holds strategy state ({} first) but this strategy keeps none; "
                "resume with the strategy the checkpoint was written with",
                state.front().first);
}

}  // namespace bertlab
