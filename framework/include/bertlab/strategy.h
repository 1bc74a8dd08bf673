#pragma once
// A distribution strategy: how the replicas' local gradients become one averaged gradient.
// The host runs one training loop per rank (threads in one process, or processes) and calls
// the strategy on every rank with that rank's communicator; see docs/architecture.md, "One
// training step".

namespace bertlab {

class Communicator;
class GradientSet;

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Replaces `grads` (this rank's gradient of its own mean loss) with the average over all
  /// ranks, identical on every rank.
  virtual void reduce_gradients(GradientSet& grads, Communicator& comm) = 0;
  /// > 0: the host may average dense gradients while backward runs, as DDP does: buckets of
  /// this many MiB, all-reduced (sum, /N) as soon as all their gradients exist; the entries
  /// it averaged arrive in reduce_gradients marked GradientEntry::averaged. 0 (the default):
  /// reduce_gradients gets every gradient as computed.
  virtual double overlap_bucket_mb() const { return 0.0; }
};

}  // namespace bertlab
