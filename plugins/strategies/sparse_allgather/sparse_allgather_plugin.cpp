// Registers the `sparse_allgather` strategy.

#include <bertlab/plugin.h>

#include "sparse_allgather.h"

namespace bertlab::sparse_allgather {

namespace {

void register_components(Registry& registry) {
  registry.add_strategy(
      ComponentSpec{
          "sparse_allgather",
          "data-parallel replicas; dense gradients all-reduced, sparse rows all-gathered, /N",
          {float_option("bucket_mb", 25.0, "MiB of dense gradients per all-reduce").above(0),
           string_option("emulate", "none",
                         "reproduce a published averaging: first_replica_indices (values "
                         "averaged under replica 0's indices), no_divide (rows concatenated "
                         "without /N)")
               .one_of({"none", "first_replica_indices", "no_divide"}),
           bool_option("overlap_backward", false,
                       "all-reduce dense gradient buckets while backward runs (as PyTorch DDP); "
                       "sparse rows are gathered after it")}},
      [](const ConfigView& view) {
        SparseAllgatherOptions options;
        options.bucket_mb = view.get_float("bucket_mb");
        options.emulate = parse_emulation(view.get_string("emulate"));
        options.overlap_backward = view.get_bool("overlap_backward");
        return std::make_unique<SparseAllgatherStrategy>(options);
      });
}

}  // namespace

}  // namespace bertlab::sparse_allgather

BERTLAB_PLUGIN("sparse_allgather", "0.1.0", bertlab::sparse_allgather::register_components)
