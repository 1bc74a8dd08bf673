#pragma once
// Gradient collectives every strategy builds on.

namespace bertlab {

class Communicator;
class GradientSet;

/// Averages every dense entry over the ranks: flattened into buckets of at most `bucket_mb`
/// MiB, each all-reduced (sum) and divided by the world size. Sparse entries, and entries
/// already averaged (GradientEntry::averaged), are left alone.
void all_reduce_mean_dense(GradientSet& grads, Communicator& comm, double bucket_mb);

}  // namespace bertlab
