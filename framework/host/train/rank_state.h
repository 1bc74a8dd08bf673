#pragma once
// What a checkpoint keeps of every rank besides rank 0's model and optimizer: each rank's
// strategy state (residuals, warm-started matrices), and, for a strategy whose replicas differ
// between synchronisations (local SGD), each rank's parameters and optimizer state. Gathered
// over the communicator, so it works for thread and process ranks alike (and ranks on other
// machines), and written by rank 0 into the checkpoint's ranks.safetensors as
// "rank<R>/strategy/NAME", "rank<R>/model/NAME", "rank<R>/optimizer/NAME".

#include <bertlab/io/safetensors.h>
#include <bertlab/optimizer.h>

#include <vector>

namespace bertlab {

class Communicator;
class Strategy;

/// Every rank's `mine`, on every rank (names, dtypes and shapes may differ between ranks).
std::vector<NamedTensors> gather_rank_tensors(const NamedTensors& mine, Communicator& comm);

/// This rank's state for the checkpoint: the strategy's state_dict(), and with
/// `with_weights` the parameters and the optimizer's state; gathered from every rank and named
/// rank<R>/... (call on every rank; the result is the same on each).
NamedTensors gather_rank_state(const Strategy& strategy, const Optimizer& optimizer,
                               const std::vector<NamedTensor>& parameters, bool with_weights,
                               Communicator& comm);

/// Restores this rank's part of `saved` (a checkpoint's ranks.safetensors): the strategy's
/// state, and the parameters and optimizer state when the checkpoint has them for this rank
/// (the number of ranks cannot change on resume: compare_resume_config refuses it).
void restore_rank_state(const NamedTensors& saved, int rank, Strategy& strategy,
                        Optimizer& optimizer, const std::vector<NamedTensor>& parameters);

}  // namespace bertlab
