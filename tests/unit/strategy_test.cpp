// The strategy plugins on hand-checkable gradients: 2 replicas as threads joined by a real Gloo
// process group, a 5-row embedding gradient with duplicate indices in different orders on each
// replica, and a dense gradient. Each strategy and emulation has an exact expected result.

#include <ATen/ATen.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/strategy.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>

#include "comm/gloo_communicator.h"
#include "comm/nccl_communicator.h"
#include "runtime/plugin_host.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace bertlab {
namespace {

constexpr int kWorld = 2;

/// Replica r's local gradients (see the file comment).
GradientSet local_gradients(int rank) {
  GradientSet g;
  GradientEntry emb;
  emb.name = "bert.embeddings.word_embeddings.weight";
  emb.shape = {5, 2};
  if (rank == 0) {
    emb.indices = at::tensor({1, 3, 1}, at::kLong);
    emb.values = at::tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}).view({3, 2});
  } else {
    emb.indices = at::tensor({4, 1, 0}, at::kLong);
    emb.values = at::tensor({10.f, 20.f, 30.f, 40.f, 50.f, 60.f}).view({3, 2});
  }
  g.add(emb);
  GradientEntry w;
  w.name = "classifier.bias";
  w.shape = {2};
  w.dense = rank == 0 ? at::tensor({1.f, 2.f}) : at::tensor({3.f, 6.f});
  g.add(w);
  return g;
}

/// The single-device gradient: (dense(g0) + dense(g1)) / 2.
at::Tensor mean_embedding() {
  return at::tensor({25.f, 30.f, 18.f, 24.f, 0.f, 0.f, 1.5f, 2.f, 5.f, 10.f}).view({5, 2});
}

/// Runs `body(rank, communicator)` on kWorld thread ranks joined through one in-process store;
/// returns each rank's error message ("" when it finished).
std::vector<std::string> on_every_rank(std::chrono::seconds timeout,
                                       const std::function<void(int, Communicator&)>& body) {
  auto store = RendezvousStore::in_process();
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = make_gloo_communicator(*store, r, kWorld, timeout);
        body(r, *comm);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

class StrategyPlugins : public ::testing::Test {
 protected:
  /// Runs strategy `name` with `options` on both replicas; returns each rank's result.
  std::vector<GradientSet> reduce(const std::string& name,
                                  std::map<std::string, OptionValue> options = {},
                                  const std::function<GradientSet(int)>& local = local_gradients) {
    const Component* c =
        bertlab::testing::builtin_plugins().registry().find(ComponentKind::kStrategy, name);
    EXPECT_NE(c, nullptr) << name;
    ConfigView view("strategy", c->spec.options, std::move(options));
    std::vector<GradientSet> out(kWorld);
    const auto errors = on_every_rank(std::chrono::seconds(30), [&](int r, Communicator& comm) {
      auto strategy = c->strategy_factory(view);
      out[r] = local(r);
      strategy->reduce_gradients(out[r], comm);
    });
    for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
    return out;
  }
};

void expect_same_on_every_rank(const std::vector<GradientSet>& results) {
  for (size_t i = 0; i < results[0].entries().size(); ++i) {
    EXPECT_TRUE(at::equal(results[0].entries()[i].to_dense(), results[1].entries()[i].to_dense()))
        << results[0].entries()[i].name;
  }
}

TEST_F(StrategyPlugins, MirroredAveragesDenselyOnEveryRank) {
  auto results = reduce("mirrored");
  expect_same_on_every_rank(results);
  const auto& e = results[0].entries();
  EXPECT_FALSE(e[0].is_sparse());
  EXPECT_TRUE(at::equal(e[0].dense, mean_embedding())) << e[0].dense;
  EXPECT_TRUE(at::equal(e[1].dense, at::tensor({2.f, 4.f})));
}

/// A dense gradient whose average a 16-bit wire rounds by a hand-computable amount:
/// rank 0 [1 + 2^-12, 1000.1, 40000], rank 1 [1, 70000, 40000].
GradientSet rounding_gradients(int rank) {
  GradientSet g;
  GradientEntry w;
  w.name = "w";
  w.shape = {3};
  w.dense = rank == 0 ? at::tensor({1.f + std::ldexp(1.f, -12), 1000.1f, 40000.f})
                      : at::tensor({1.f, 70000.f, 40000.f});
  g.add(w);
  return g;
}

// fp16, divided before the cast: 0.5 + 2^-13 rounds to 0.5 (half's spacing at 0.5 is 2^-11), so
// the first mean is 1, not 1 + 2^-13; 500.05 → 500 (spacing 0.25), 35000 → 35008 (spacing 32),
// their sum 35508 → 35520; 20000 + 20000 = 40000 stays in range.
TEST_F(StrategyPlugins, MirroredFp16IsTheMeanRoundedToHalfByHand) {
  auto results = reduce("mirrored", {{"compression", std::string("fp16")}}, rounding_gradients);
  expect_same_on_every_rank(results);
  EXPECT_TRUE(at::equal(results[0].entries()[0].dense, at::tensor({1.f, 35520.f, 40000.f})))
      << results[0].entries()[0].dense;
}

// bf16 (8 significant bits): 0.5 + 2^-13 → 0.5; 500.05 → 500 (spacing 2), 35000 → 35072
// (spacing 256), the sum 35572 → 35584; 20000 → 19968 (spacing 128), the sum 39936.
TEST_F(StrategyPlugins, MirroredBf16IsTheMeanRoundedToBfloat16ByHand) {
  auto results = reduce("mirrored", {{"compression", std::string("bf16")}}, rounding_gradients);
  expect_same_on_every_rank(results);
  EXPECT_TRUE(at::equal(results[0].entries()[0].dense, at::tensor({1.f, 35584.f, 39936.f})))
      << results[0].entries()[0].dense;
}

// Cast before the division (fp16_compress_hook before PyTorch #57410's fix): 70000 is already
// past half's 65504, and 40000 + 40000 overflows in the sum; both are inf after /2.
TEST_F(StrategyPlugins, CastBeforeDivideEmulationOverflowsFp16) {
  auto results =
      reduce("mirrored",
             {{"compression", std::string("fp16")}, {"emulate", std::string("cast_before_divide")}},
             rounding_gradients);
  const at::Tensor g = results[0].entries()[0].dense;
  EXPECT_EQ(g[0].item<float>(), 1.f) << g;
  EXPECT_TRUE(std::isinf(g[1].item<float>())) << g;
  EXPECT_TRUE(std::isinf(g[2].item<float>())) << g;
}

TEST_F(StrategyPlugins, SparseAllgatherGivesTheMeanAsCoalescedRows) {
  auto results = reduce("sparse_allgather");
  expect_same_on_every_rank(results);
  const auto& e = results[0].entries();
  ASSERT_TRUE(e[0].is_sparse());
  EXPECT_TRUE(at::equal(e[0].indices, at::tensor({0, 1, 3, 4}, at::kLong))) << e[0].indices;
  EXPECT_TRUE(at::equal(e[0].to_dense(), mean_embedding())) << e[0].to_dense();
  EXPECT_TRUE(at::equal(e[1].dense, at::tensor({2.f, 4.f})));
}

TEST_F(StrategyPlugins, NoDivideEmulationIsExactlyTwiceTheMean) {
  auto results = reduce("sparse_allgather", {{"emulate", std::string("no_divide")}});
  expect_same_on_every_rank(results);
  const auto& e = results[0].entries();
  EXPECT_TRUE(at::equal(e[0].to_dense(), mean_embedding() * 2)) << e[0].to_dense();
  // Every replica's rows, concatenated in rank order, as that implementation sent them.
  EXPECT_EQ(e[0].indices.size(0), 6);
  EXPECT_TRUE(at::equal(e[1].dense, at::tensor({2.f, 4.f})));  // dense gradients are averaged
}

TEST_F(StrategyPlugins, FirstReplicaIndicesEmulationIsWrongByTheHandComputedAmount) {
  auto results = reduce("sparse_allgather", {{"emulate", std::string("first_replica_indices")}});
  expect_same_on_every_rank(results);
  const auto& e = results[0].entries();
  // Values averaged element-wise ([1,2]+[10,20])/2 = [5.5,11], [16.5,22], [27.5,33], placed at
  // replica 0's indices [1, 3, 1].
  at::Tensor expected =
      at::tensor({0.f, 0.f, 33.f, 44.f, 0.f, 0.f, 16.5f, 22.f, 0.f, 0.f}).view({5, 2});
  EXPECT_TRUE(at::equal(e[0].to_dense(), expected)) << e[0].to_dense();
  at::Tensor error =
      at::tensor({-25.f, -30.f, 15.f, 20.f, 0.f, 0.f, 15.f, 20.f, -5.f, -10.f}).view({5, 2});
  EXPECT_TRUE(at::equal(e[0].to_dense() - mean_embedding(), error));
}

TEST_F(StrategyPlugins, ARankThatStopsMakesTheOthersFailWithinTheTimeout) {
  const Component* c =
      bertlab::testing::builtin_plugins().registry().find(ComponentKind::kStrategy, "mirrored");
  ASSERT_NE(c, nullptr);
  ConfigView view("strategy", c->spec.options, {});
  auto store = RendezvousStore::in_process();
  std::string error;
  const auto start = std::chrono::steady_clock::now();
  std::thread survivor([&] {
    try {
      auto comm = make_gloo_communicator(*store, 0, kWorld, std::chrono::seconds(3));
      GradientSet g = local_gradients(0);
      c->strategy_factory(view)->reduce_gradients(g, *comm);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::thread quitter([&] {
    // Joins the group, then stops before the first collective.
    auto comm = make_gloo_communicator(*store, 1, kWorld, std::chrono::seconds(3));
  });
  quitter.join();
  survivor.join();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 20.0);
  EXPECT_NE(error.find("[comm] rank 0 of 2: all_reduce failed or timed out after 3000 ms: rank "
                       "1 stopped;"),
            std::string::npos)
      << error;
}

// Ranks whose collectives differ in size (another model on one rank) get an error on every
// rank naming both sizes, not a hang or a sum of unrelated bytes.
TEST(Communicator, RanksThatDisagreeOnACollectiveSizeFailOnEveryRank) {
  const auto errors = on_every_rank(std::chrono::seconds(10), [](int r, Communicator& comm) {
    std::vector<at::Tensor> same{at::ones({3})};
    comm.all_reduce_sum(same);  // agreeing sizes pass
    EXPECT_TRUE(at::equal(same[0], at::full({3}, 2.f)));
    std::vector<at::Tensor> grads{at::ones({r == 0 ? 4 : 5})};
    comm.all_reduce_sum(grads);
  });
  EXPECT_NE(errors[0].find("[comm] rank 0 of 2: the ranks disagree on the size of a all_reduce: "
                           "this rank passes 1 tensor(s) of 4 elements, the ranks pass 1 to 1 "
                           "tensors of 4 to 5 elements"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 1 of 2: the ranks disagree on the size of a all_reduce: this "
                           "rank passes 1 tensor(s) of 5 elements"),
            std::string::npos)
      << errors[1];
}

// The async all-reduce the host overlaps with backward: started collectives complete in order
// with the sums and count their payload; the local communicator's default is the blocking call.
TEST(Communicator, AsyncAllReducesGiveTheSumsOnceWaitedFor) {
  const auto errors = on_every_rank(std::chrono::seconds(30), [](int r, Communicator& comm) {
    std::vector<at::Tensor> first{at::full({4}, static_cast<float>(r + 1))};
    std::vector<at::Tensor> second{at::arange(3, at::kFloat) * (r + 1)};
    comm.reset_traffic();
    comm.set_traffic(Traffic::kDense);
    auto a = comm.all_reduce_sum_async(first);
    auto b = comm.all_reduce_sum_async(second);
    comm.set_traffic(Traffic::kOther);
    a->wait();
    b->wait();
    EXPECT_TRUE(at::equal(first[0], at::full({4}, 3.f))) << first[0];
    EXPECT_TRUE(at::equal(second[0], at::tensor({0.f, 3.f, 6.f}))) << second[0];
    EXPECT_EQ(comm.traffic_bytes(Traffic::kDense), (4 + 3) * 4);
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  auto local = make_local_communicator();
  std::vector<at::Tensor> t{at::ones({2})};
  local->all_reduce_sum_async(t)->wait();
  EXPECT_TRUE(at::equal(t[0], at::ones({2})));
}

TEST(Communicator, AnAsyncAllReduceWithAStoppedRankFailsNamingRankAndCollective) {
  auto store = RendezvousStore::in_process();
  std::string error;
  std::thread survivor([&] {
    try {
      auto comm = make_gloo_communicator(*store, 0, kWorld, std::chrono::seconds(3));
      std::vector<at::Tensor> t{at::ones({8})};
      comm->all_reduce_sum_async(t)->wait();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::thread quitter(
      [&] { auto comm = make_gloo_communicator(*store, 1, kWorld, std::chrono::seconds(3)); });
  quitter.join();
  survivor.join();
  EXPECT_NE(error.find("[comm] rank 0 of 2: async all_reduce failed or timed out after 3000 ms: "
                       "rank 1 stopped;"),
            std::string::npos)
      << error;
}

// The NCCL communicator: on a machine with CUDA devices (a build against a CUDA libtorch), each
// visible device is one thread rank and the collectives give exact sums and gathers; in a
// CPU-only build, asking for it is a configuration error that says how to get it.
TEST(Communicator, NcclCollectivesOnEveryDeviceOrAClearErrorWithoutCuda) {
  auto store = RendezvousStore::in_process();
  if (!nccl_available()) {
    try {
      make_nccl_communicator(*store, 0, 1, std::chrono::seconds(5), 0);
      FAIL() << "a build without NCCL made an NCCL communicator";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("built against a CPU-only libtorch"), std::string::npos)
          << e.what();
    }
    return;
  }
  const int world = cuda_device_count();
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = make_nccl_communicator(*store, r, world, std::chrono::seconds(60), r);
        EXPECT_EQ(comm->backend(), "nccl");
        const auto device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(r));
        std::vector<at::Tensor> sum{at::full({1000}, static_cast<float>(r + 1), device)};
        comm->all_reduce_sum(sum);
        EXPECT_TRUE(at::equal(sum[0].cpu(), at::full({1000}, world * (world + 1) / 2.f)));
        const auto gathered =
            comm->all_gather(at::full({3}, r, at::dtype(at::kLong).device(device)));
        ASSERT_EQ(static_cast<int>(gathered.size()), world);
        for (int k = 0; k < world; ++k)
          EXPECT_TRUE(at::equal(gathered[k].cpu(), at::full({3}, k, at::kLong)));
        std::vector<at::Tensor> root{at::full({2}, static_cast<float>(r), device)};
        comm->broadcast(root, 0);
        EXPECT_TRUE(at::equal(root[0].cpu(), at::zeros({2})));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace
}  // namespace bertlab
