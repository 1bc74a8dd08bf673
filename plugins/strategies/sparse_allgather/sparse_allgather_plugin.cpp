// Registers the `sparse_allgather` strategy.

#include <bertlab/collectives.h>
#include <bertlab/error.h>
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
                       "sparse rows are gathered after it"),
           string_option("compression", "none",
                         "the type dense buckets and sparse rows' values travel in: none "
                         "(float32), fp16 or bf16 (divided by N, cast, summed in that type, cast "
                         "back, as mirrored's; rows summed in rank order)")
               .one_of({"none", "fp16", "bf16"})},
          [](const ConfigView& view, int replicas) {
            // With a 16-bit wire, rows and buckets alike: each share rounded once, N − 1
            // additions in the 16-bit type. An emulation claims what the fix claims.
            const WireFormat wire = parse_compression(view.get_string("compression"));
            if (wire != WireFormat::kFloat32) return dense_reduce_contract(wire, replicas);
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
        options.wire = parse_compression(view.get_string("compression"));
        BERTLAB_CHECK_AS(ConfigError,
                         !(options.overlap_backward && options.wire != WireFormat::kFloat32),
                         "[strategy] overlap_backward = true with compression = \"{}\": the "
                         "buckets all-reduced during backward travel as float32; set one of "
                         "them off",
                         view.get_string("compression"));
        BERTLAB_CHECK_AS(ConfigError,
                         options.wire == WireFormat::kFloat32 ||
                             options.emulate == Emulation::kNone ||
                             options.emulate == Emulation::kDivideAfter,
                         "[strategy] emulate = \"{}\" with compression = \"{}\": that "
                         "implementation sent float32 rows; use compression = \"none\"",
                         view.get_string("emulate"), view.get_string("compression"));
        return std::make_unique<SparseAllgatherStrategy>(options);
      });
}

}  // namespace

}  // namespace bertlab::sparse_allgather

BERTLAB_PLUGIN("sparse_allgather", "0.1.0", bertlab::sparse_allgather::register_components)
