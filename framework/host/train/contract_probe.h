#pragma once
// Measures, on every rank of a `bertlab gradcheck` run, what a strategy's contract claims
// (bertlab/strategy.h): each step's averaged gradient against the exact float64 mean of the same
// local gradients (bounded), error feedback conservation, and the replicas' parameters right
// after a synchronisation. The measures are reduced over the ranks, so every rank holds the
// worst one.

#include <bertlab/optimizer.h>
#include <bertlab/strategy.h>

#include <limits>
#include <map>
#include <string>
#include <vector>

namespace bertlab {

class Communicator;
class GradientSet;

/// One step's measures, the same on every rank.
struct ContractMeasures {
  /// kBounded: max over elements of |averaged − exact mean| / (atol + rtol·mean|g_i|); <= 1
  /// holds the bound; infinite when an averaged element is not finite.
  double bound_ratio = 0.0;
  double max_from_exact = 0.0;  ///< kBounded: max |averaged − exact mean|
  /// kBounded: ‖(1/N)Σ_i |g_i|‖₂ over every element, the bound's scale as one norm (a baseline's
  /// tolerance of the gradient norm follows from it), and the number of elements.
  double abs_mean_norm = 0.0;
  int64_t elements = 0;
  /// error_feedback_conserves: max over ranks and parameters of
  /// ‖g + residual_before − sent − residual_after‖∞ / ‖g + residual_before‖∞.
  double error_feedback = 0.0;
  int64_t error_feedback_entries = 0;  ///< parameters the strategy reported error feedback for
  bool synced = false;                 ///< the strategy synchronised the parameters this step
  /// replicas_equal_after_sync, when synced: max |p_r − p_0| over ranks and elements.
  double sync_difference = 0.0;
  /// optimizer_state_sharded: max over ranks of |elements of state held − total / N|, in units
  /// of the largest one parameter's state (<= 1 holds the claim); NaN when not measured.
  double state_share = std::numeric_limits<double>::quiet_NaN();
  int64_t state_shared_parameters = 0;  ///< parameters whose state more than one rank holds
  int64_t state_elements_max = 0;       ///< the most optimizer-state elements one rank holds
  int64_t state_elements_total = 0;     ///< over every rank
  int64_t state_elements_largest = 0;   ///< the largest one parameter's state
};

class ContractProbe {
 public:
  explicit ContractProbe(StrategyContract contract) : contract_(std::move(contract)) {}
  const StrategyContract& contract() const { return contract_; }

  /// Before reduce_gradients: keeps this rank's local gradients (float64); for a bounded
  /// contract all-reduces their sum and their absolute sum (the exact mean and the bound's
  /// scale). Throws when the host already averaged some (overlap_backward).
  void before_reduce(const GradientSet& local, Communicator& comm);
  /// After reduce_gradients, before unscaling: the bound and the error feedback.
  void after_reduce(const GradientSet& averaged, const Strategy& strategy, Communicator& comm);
  /// After the update: when `synced`, how far each rank's parameters are from rank 0's; how the
  /// optimizer state is spread over the ranks.
  void after_update(bool synced, const std::vector<NamedTensor>& parameters,
                    const Optimizer& optimizer, Communicator& comm);
  /// This step's measures (worst over the ranks); clears them for the next step.
  ContractMeasures take();

 private:
  void measure_state_share(const std::vector<NamedTensor>& parameters, const Optimizer& optimizer,
                           Communicator& comm);

  StrategyContract contract_;
  std::map<std::string, at::Tensor> local_;       ///< name → this rank's gradient, float64
  std::map<std::string, at::Tensor> exact_mean_;  ///< bounded: name → Σ_i g_i / N
  std::map<std::string, at::Tensor> abs_mean_;    ///< bounded: name → Σ_i |g_i| / N
  ContractMeasures step_;
};

}  // namespace bertlab
