// Registers the `sparse_allgather` strategy.

#include <bertlab/plugin.h>
#include <bertlab/strategy.h>

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
                         "without /N), divide_after (rows summed, then /N: PyTorch #61814)")
               .one_of({"none", "first_replica_indices", "no_divide", "divide_after"}),
           string_option("dense_fallback", "auto",
                         "auto: per step, densify and all-reduce a sparse gradient when its rows' "
                         "all-gather, (N-1)*max_rows*(H+1) values, would send more than a ring "
                         "all-reduce of the table, 2(N-1)/N*V*H (exact either way); never: "
                         "always gather rows")
               .one_of({"auto", "never"}),
           bool_option("overlap_backward", false,
                       "all-reduce dense gradient buckets while backward runs (as PyTorch DDP); "
                       "sparse rows are gathered after it")},
          [](const ConfigView&, int) {
            StrategyContract c;
            c.derivation =
                "dense entries summed in float32 and divided by N; every rank's sparse rows "
                "gathered, divided by N and coalesced (or, with dense_fallback, densified, summed "
                "and divided by N): one device's gradient up to the order of the additions";
            return c;
          }},
      [](const ConfigView& view) {
        SparseAllgatherOptions options;
        options.bucket_mb = view.get_float("bucket_mb");
        options.emulate = parse_emulation(view.get_string("emulate"));
        options.overlap_backward = view.get_bool("overlap_backward");
        options.dense_fallback = parse_dense_fallback(view.get_string("dense_fallback"));
        return std::make_unique<SparseAllgatherStrategy>(options);
      });
}

}  // namespace

}  // namespace bertlab::sparse_allgather

BERTLAB_PLUGIN("sparse_allgather", "0.1.0", bertlab::sparse_allgather::register_components)
