#include <ATen/ATen.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>

namespace bertlab {

namespace {

/// A collective that finished before its handle was returned.
class CompletedCollective final : public PendingCollective {
 public:
  void wait() override {}
};

/// A world of one rank: the sum, gather and broadcast of one tensor is that tensor.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "local"; }
  void all_reduce_sum(std::vector<at::Tensor>&) override {}
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor) override { return {tensor}; }
  void broadcast(std::vector<at::Tensor>&, int) override {}
  void barrier() override {}
};

}  // namespace

std::unique_ptr<PendingCollective> Communicator::all_reduce_sum_async(
    std::vector<at::Tensor>& tensors) {
  all_reduce_sum(tensors);
  return std::make_unique<CompletedCollective>();
}

at::Tensor Communicator::reduce_scatter_sum(const at::Tensor& input) {
  const int64_t n = world_size();
  BERTLAB_CHECK(input.dim() == 1 && input.numel() % n == 0,
                "reduce_scatter_sum: the input must be 1-D with {} equal chunks, got {} elements",
                n, input.numel());
  const int64_t chunk = input.numel() / n;
  std::vector<at::Tensor> sum{input};
  all_reduce_sum(sum);
  return input.narrow(0, rank() * chunk, chunk);
}

std::unique_ptr<Communicator> make_local_communicator() {
  return std::make_unique<LocalCommunicator>();
}

}  // namespace bertlab
