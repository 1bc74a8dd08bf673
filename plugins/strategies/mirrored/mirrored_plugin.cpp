// The `mirrored` strategy: every gradient is averaged densely over the replicas. Sparse rows are
// densified first, so the embedding costs a full all-reduce of the table (the reference cost
// sparse_allgather improves on).

#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/grad.h>
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>

namespace bertlab::mirrored {

namespace {

struct MirroredOptions {
  double bucket_mb = 25.0;        ///< MiB per all-reduce bucket
  bool overlap_backward = false;  ///< dense buckets all-reduced while backward runs
};

class MirroredStrategy final : public Strategy {
 public:
  explicit MirroredStrategy(MirroredOptions options) : options_(options) {}

  void reduce_gradients(GradientSet& grads, Communicator& comm) override {
    grads.densify();
    all_reduce_mean_dense(grads, comm, options_.bucket_mb);
  }
  double overlap_bucket_mb() const override {
    return options_.overlap_backward ? options_.bucket_mb : 0.0;
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
                       "PyTorch DDP); sparse rows are densified and all-reduced after it")}},
      [](const ConfigView& view) {
        MirroredOptions options;
        options.bucket_mb = view.get_float("bucket_mb");
        options.overlap_backward = view.get_bool("overlap_backward");
        return std::make_unique<MirroredStrategy>(options);
      });
}

}  // namespace

}  // namespace bertlab::mirrored

BERTLAB_PLUGIN("mirrored", "0.1.0", bertlab::mirrored::register_components)
