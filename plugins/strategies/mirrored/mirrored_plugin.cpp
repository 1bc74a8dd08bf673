// The `mirrored` strategy: every gradient is averaged densely over the replicas. Sparse rows are
// densified first, so the embedding costs a full all-reduce of the table (the reference cost
// sparse_allgather improves on). `compression` sends the buckets as float16 or bfloat16, as
// PyTorch's fp16_compress_hook / bf16_compress_hook do.

#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>

namespace bertlab::mirrored {

namespace {

struct MirroredOptions {
  DenseReduceOptions reduce;      ///< bucket size, wire format, division before or after the cast
  bool overlap_backward = false;  ///< dense buckets all-reduced while backward runs
};

MirroredOptions read_options(const ConfigView& view) {
  MirroredOptions options;
  options.reduce.bucket_mb = view.get_float("bucket_mb");
  options.reduce.wire = parse_compression(view.get_string("compression"));
  options.reduce.divide_before_cast = view.get_string("emulate") != "cast_before_divide";
  options.overlap_backward = view.get_bool("overlap_backward");
  BERTLAB_CHECK_AS(ConfigError,
                   !(options.overlap_backward && options.reduce.wire != WireFormat::kFloat32),
                   "[strategy] overlap_backward = true with compression = \"{}\": the buckets "
                   "all-reduced during backward travel as float32; set one of them off",
                   view.get_string("compression"));
  BERTLAB_CHECK_AS(ConfigError,
                   options.reduce.divide_before_cast || options.reduce.wire != WireFormat::kFloat32,
                   "[strategy] emulate = \"cast_before_divide\" needs compression = \"fp16\" or "
                   "\"bf16\": in float32 there is no cast");
  return options;
}

class MirroredStrategy final : public Strategy {
 public:
  explicit MirroredStrategy(MirroredOptions options) : options_(options) {}

  void reduce_gradients(GradientSet& grads, Communicator& comm) override {
    grads.densify();
    all_reduce_mean_dense(grads, comm, options_.reduce);
  }
  double overlap_bucket_mb() const override {
    return options_.overlap_backward ? options_.reduce.bucket_mb : 0.0;
  }

 private:
  MirroredOptions options_;
};

void register_components(Registry& registry) {
  registry.add_strategy(
      ComponentSpec{
          "mirrored",
          "data-parallel replicas; gradients densified and all-reduced (sum, /N) in "
          "buckets",
          {float_option("bucket_mb", 25.0, "MiB of gradients per all-reduce").above(0),
           bool_option("overlap_backward", false,
                       "all-reduce dense gradient buckets while backward runs (as "
                       "PyTorch DDP); sparse rows are densified and all-reduced after it"),
           string_option("compression", "none",
                         "the buckets' type on the wire: none (float32), fp16 or bf16 (each "
                         "bucket divided by N, cast, all-reduced, cast back; half the bytes)")
               .one_of({"none", "fp16", "bf16"}),
           string_option("emulate", "none",
                         "reproduce a published averaging: cast_before_divide (cast, sum, then "
                         "/N, as fp16_compress_hook first did: the sum overflows float16)")
               .one_of({"none", "cast_before_divide"})},
          [](const ConfigView& view, int replicas) {
            // The emulation claims what the fixed hook claims: gradcheck shows it breaks it.
            return dense_reduce_contract(parse_compression(view.get_string("compression")),
                                         replicas);
          }},
      [](const ConfigView& view) {
        return std::make_unique<MirroredStrategy>(read_options(view));
      });
}

}  // namespace

}  // namespace bertlab::mirrored

BERTLAB_PLUGIN("mirrored", "0.1.0", bertlab::mirrored::register_components)
