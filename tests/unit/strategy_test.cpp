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
  threads.reserve(kWorld);
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

/// Strategy `name` with `options`, built on each rank by the plugin's factory.
std::unique_ptr<Strategy> make_strategy(const std::string& name,
                                        std::map<std::string, OptionValue> options) {
  const Component* c =
      bertlab::testing::builtin_plugins().registry().find(ComponentKind::kStrategy, name);
  EXPECT_NE(c, nullptr) << name;
  return c->strategy_factory(ConfigView("strategy", c->spec.options, std::move(options)));
}

StrategyContract contract_of(const std::string& name, std::map<std::string, OptionValue> options,
                             int replicas) {
  const Component* c =
      bertlab::testing::builtin_plugins().registry().find(ComponentKind::kStrategy, name);
  EXPECT_TRUE(c != nullptr && c->spec.contract) << name;
  return c->spec.contract(ConfigView("strategy", c->spec.options, std::move(options)), replicas);
}

TEST(StrategyContracts, EveryBuiltInStrategyDeclaresOne) {
  EXPECT_EQ(contract_of("single", {}, 1).summary(), "exact");
  EXPECT_EQ(contract_of("mirrored", {}, 2).summary(), "exact");
  EXPECT_EQ(contract_of("sparse_allgather", {}, 2).summary(), "exact");
  // fp16 over 2 ranks: γ_2 = 2·2^-11 / (1 − 2·2^-11) plus float32's 2^-24 for the division.
  const StrategyContract fp16 = contract_of("mirrored", {{"compression", std::string("fp16")}}, 2);
  EXPECT_EQ(fp16.kind, ContractKind::kBounded);
  EXPECT_DOUBLE_EQ(
      fp16.rtol, 2 * std::ldexp(1.0, -11) / (1 - 2 * std::ldexp(1.0, -11)) + std::ldexp(1.0, -24));
  EXPECT_DOUBLE_EQ(fp16.atol, 2 * std::ldexp(1.0, -24));
  EXPECT_GT(contract_of("mirrored", {{"compression", std::string("bf16")}}, 4).rtol, 4 * fp16.rtol);
  EXPECT_EQ(contract_of("powersgd", {{"start_step", int64_t{3}}}, 2).summary(),
            "exact_until(step 3) + error_feedback_conserves");
  EXPECT_EQ(contract_of("local_sgd", {{"start_step", int64_t{1}}}, 4).summary(),
            "exact_until(step 1) + replicas_equal_after_sync");
  EXPECT_EQ(contract_of("zero1", {}, 4).summary(), "exact + optimizer_state_sharded");
}

// The fixed hook's bound holds on the hand-computed example: |r − m| <= atol + rtol·mean|g|.
TEST_F(StrategyPlugins, MirroredFp16StaysWithinItsDeclaredBound) {
  auto results = reduce("mirrored", {{"compression", std::string("fp16")}}, rounding_gradients);
  const StrategyContract c = contract_of("mirrored", {{"compression", std::string("fp16")}}, 2);
  const at::Tensor g0 = rounding_gradients(0).entries()[0].dense.to(at::kDouble);
  const at::Tensor g1 = rounding_gradients(1).entries()[0].dense.to(at::kDouble);
  const at::Tensor exact = (g0 + g1) / 2;
  const at::Tensor room = c.atol + c.rtol * (g0.abs() + g1.abs()) / 2;
  const at::Tensor diff = (results[0].entries()[0].dense.to(at::kDouble) - exact).abs();
  EXPECT_TRUE((diff <= room).all().item<bool>()) << diff << room;
  // And the bound is not loose by orders of magnitude: 35520 vs 35500.05 uses over a fifth of it.
  EXPECT_GT((diff / room).max().item<double>(), 0.2);
}

/// A 4×3 matrix gradient whose mean over the two ranks is rank 1 (only its first row is
/// non-zero), so rank-1 PowerSGD recovers it exactly whatever Q it starts from.
GradientSet powersgd_gradients(int rank) {
  GradientSet g;
  GradientEntry w;
  w.name = "w";
  w.shape = {4, 3};
  w.dense = rank == 0 ? at::tensor({1.f, 2.f, 3.f, 0.f, 0.f, 0.f, 4.f, 0.f, 0.f, 0.f, 0.f, 0.f})
                      : at::tensor({3.f, 2.f, 1.f, 0.f, 0.f, 0.f, -4.f, 0.f, 0.f, 0.f, 0.f, 0.f});
  w.dense = w.dense.view({4, 3});
  g.add(w);
  return g;
}

// One PowerSGD step by hand: P = M̄·Q = e1·(2, 2, 2)·Q is a multiple of e1, so P̂ = ±e1; the
// average P̂·Q̄ᵀ = e1·e1ᵀ·M̄ = M̄ = [[2, 2, 2], 0, 0, 0]. Each rank sent e1·e1ᵀ·M_r (its first
// row) and keeps the rest: rank 0 the 4 in row 3, rank 1 the −4. The emulated bug keeps
// M_r − M̄ instead: rank 0 [[−1, 0, 1], 0, [4, 0, 0], 0].
TEST(PowerSgd, OneRankOneStepOnA4x3MatrixByHand) {
  for (const bool bug : {false, true}) {
    std::vector<GradientSet> out(kWorld);
    std::vector<std::vector<ErrorFeedbackRecord>> records(kWorld);
    std::vector<std::vector<std::pair<std::string, at::Tensor>>> states(kWorld);
    const auto errors = on_every_rank(std::chrono::seconds(30), [&](int r, Communicator& comm) {
      auto s = make_strategy("powersgd",
                             {{"min_compression_rate", 1.0},
                              {"emulate", std::string(bug ? "residual_from_average" : "none")}});
      s->begin_step(0);
      out[r] = powersgd_gradients(r);
      s->reduce_gradients(out[r], comm);
      records[r] = s->last_error_feedback();
      states[r] = s->state_dict();
    });
    for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
    const at::Tensor mean =
        at::tensor({2.f, 2.f, 2.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}).view({4, 3});
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_TRUE(at::allclose(out[r].entries()[0].dense, mean, 0, 1e-6))
          << out[r].entries()[0].dense;
      ASSERT_EQ(records[r].size(), 1u);
      const at::Tensor g = powersgd_gradients(r).entries()[0].dense;
      at::Tensor kept = at::zeros({4, 3});
      kept[2][0] = r == 0 ? 4.f : -4.f;
      const at::Tensor expected_residual = bug ? g - mean : kept;
      EXPECT_TRUE(at::allclose(records[r][0].residual_after, expected_residual, 0, 1e-6))
          << records[r][0].residual_after;
      EXPECT_TRUE(at::equal(records[r][0].residual_before, at::zeros({4, 3})));
      // Conservation: g + 0 = sent + residual holds without the bug and breaks with it.
      const double miss =
          (g - records[r][0].sent - records[r][0].residual_after).abs().max().item<double>();
      if (bug) {
        EXPECT_GT(miss, 0.5);
      } else {
        EXPECT_LT(miss, 1e-6);
      }
      ASSERT_EQ(states[r].size(), 2u);  // w/q and w/residual
    }
  }
}

TEST(PowerSgd, AveragesExactlyBeforeStartStepAndVectorsAlways) {
  std::vector<GradientSet> out(kWorld);
  const auto errors = on_every_rank(std::chrono::seconds(30), [&](int r, Communicator& comm) {
    auto s = make_strategy("powersgd", {{"start_step", int64_t{1}}});
    s->begin_step(0);
    out[r] = local_gradients(r);
    s->reduce_gradients(out[r], comm);
    EXPECT_TRUE(s->last_error_feedback().empty());
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_TRUE(at::equal(out[0].entries()[0].to_dense(), mean_embedding()));
  EXPECT_TRUE(at::equal(out[0].entries()[1].dense, at::tensor({2.f, 4.f})));
}

// Local SGD from step 0 with period 2: step 0 keeps each rank's own gradient and parameters;
// after step 1 the parameters are the mean, bitwise equal on both ranks.
TEST(LocalSgd, LocalStepsThenTheParametersAveragedAtTheSyncStep) {
  std::vector<at::Tensor> params(kWorld);
  std::vector<std::vector<bool>> synced(kWorld);
  std::vector<at::Tensor> grads(kWorld);
  const auto errors = on_every_rank(std::chrono::seconds(30), [&](int r, Communicator& comm) {
    auto s = make_strategy("local_sgd", {{"period", int64_t{2}}});
    params[r] = r == 0 ? at::tensor({1.f, 2.f, 3.f}) : at::tensor({3.f, 6.f, 10.f});
    const std::vector<NamedTensor> named{{"p", params[r]}};
    s->begin_step(0);
    GradientSet g = powersgd_gradients(r);
    s->reduce_gradients(g, comm);
    grads[r] = g.entries()[0].dense;
    synced[r].push_back(s->after_update(named, comm, 0));
    s->begin_step(1);
    synced[r].push_back(s->after_update(named, comm, 1));
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_TRUE(at::equal(grads[0], powersgd_gradients(0).entries()[0].dense));  // local
  EXPECT_EQ(synced[0], (std::vector<bool>{false, true}));
  EXPECT_TRUE(at::equal(params[0], at::tensor({2.f, 4.f, 6.5f}))) << params[0];
  EXPECT_TRUE(at::equal(params[0], params[1]));
}

TEST(LocalSgd, AveragesGradientsExactlyBeforeStartStep) {
  std::vector<GradientSet> out(kWorld);
  const auto errors = on_every_rank(std::chrono::seconds(30), [&](int r, Communicator& comm) {
    auto s = make_strategy("local_sgd", {{"start_step", int64_t{2}}});
    s->begin_step(1);
    out[r] = local_gradients(r);
    s->reduce_gradients(out[r], comm);
    EXPECT_TRUE(s->after_update({}, comm, 1));
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  expect_same_on_every_rank(out);
  EXPECT_TRUE(at::equal(out[0].entries()[0].dense, mean_embedding()));
}

/// zero1's fixture: four parameters of 3, 6, 4 and 3 elements (16; halves of 8). Laid end to
/// end, p1 (elements 3–8) straddles the two ranks' halves; zero1 gives it whole to one rank.
std::vector<NamedTensor> zero1_parameters(float fill) {
  return {{"p0", at::full({3}, fill)},
          {"p1", at::full({3, 2}, fill)},
          {"p2", at::full({2, 2}, fill)},
          {"p3", at::full({3}, fill)}};
}

/// Rank r's gradient of parameter i: (r + 1)·[1, 2, ..., numel] + i; their mean is
/// 1.5·[1, ..., numel] + i.
GradientSet zero1_gradients(int rank) {
  GradientSet g;
  const auto params = zero1_parameters(0.f);
  for (size_t i = 0; i < params.size(); ++i) {
    GradientEntry e;
    e.name = params[i].name;
    e.shape = params[i].tensor.sizes().vec();
    e.dense = (at::arange(1, params[i].tensor.numel() + 1, at::kFloat) * (rank + 1) +
               static_cast<float>(i))
                  .view(e.shape);
    g.add(e);
  }
  return g;
}

at::Tensor zero1_mean(const NamedTensor& p, size_t i) {
  return (at::arange(1, p.tensor.numel() + 1, at::kFloat) * 1.5 + static_cast<float>(i))
      .view(p.tensor.sizes());
}

// Greedy by size, largest first: p1 (6) to rank 0, p2 (4) and p0 (3) to rank 1, p3 to rank 0
// (6 < 7): 9 and 7 elements, each within one parameter (6) of 8. Each rank receives the mean
// gradients of its own parameters only, and the whole gradient's norm for clipping; after the
// update each rank has the parameters the other one updated.
void expect_zero1_shards_and_gathers(std::map<std::string, OptionValue> options) {
  std::vector<std::vector<bool>> masks(kWorld);
  std::vector<GradientSet> shards(kWorld), whole(kWorld);
  std::vector<std::vector<NamedTensor>> params(kWorld);
  std::vector<bool> synced(kWorld);
  const auto errors = on_every_rank(std::chrono::seconds(30), [&](int r, Communicator& comm) {
    auto s = make_strategy("zero1", options);
    params[r] = zero1_parameters(0.f);
    masks[r] = s->optimizer_shard(params[r], r, kWorld);
    s->begin_step(0);
    shards[r] = zero1_gradients(r);
    s->reduce_gradients(shards[r], comm);
    whole[r] = shards[r];
    s->complete_gradients(whole[r], comm);
    // "The update": each rank writes 10·(rank + 1) + i into the parameters it owns.
    for (size_t i = 0; i < params[r].size(); ++i) {
      if (masks[r][i]) params[r][i].tensor.fill_(10.f * (r + 1) + static_cast<float>(i));
    }
    synced[r] = s->after_update(params[r], comm, 0);
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(masks[0], (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(masks[1], (std::vector<bool>{true, false, true, false}));
  const auto reference = zero1_parameters(0.f);
  double squares = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    squares += zero1_mean(reference[i], i).to(at::kDouble).pow(2).sum().item<double>();
  }
  for (int r = 0; r < kWorld; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    std::vector<std::string> names;
    for (const auto& e : shards[r].entries()) {
      names.push_back(e.name);
      const size_t i = static_cast<size_t>(e.name[1] - '0');
      EXPECT_TRUE(at::equal(e.dense, zero1_mean(reference[i], i))) << e.name << e.dense;
    }
    EXPECT_EQ(names, r == 0 ? (std::vector<std::string>{"p1", "p3"})
                            : (std::vector<std::string>{"p0", "p2"}));
    EXPECT_TRUE(shards[r].is_shard());
    EXPECT_DOUBLE_EQ(shards[r].global_norm(), std::sqrt(squares));
    ASSERT_EQ(whole[r].entries().size(), reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      EXPECT_TRUE(at::equal(whole[r].entries()[i].dense, zero1_mean(reference[i], i))) << i;
    }
    EXPECT_TRUE(synced[r]);
    const float owner_fill[] = {20.f, 11.f, 22.f, 13.f};  // p0, p2 from rank 1; p1, p3 from 0
    for (size_t i = 0; i < reference.size(); ++i) {
      EXPECT_TRUE(at::equal(params[r][i].tensor, at::full_like(params[r][i].tensor, owner_fill[i])))
          << params[r][i].name << params[r][i].tensor;
    }
  }
}

// With buckets of 2 elements every parameter is cut across buckets; the result is the same.
TEST(Zero1, ShardsWholeParametersAndGathersTheUpdatedOnes) {
  expect_zero1_shards_and_gathers({});
  expect_zero1_shards_and_gathers({{"bucket_mb", 8.0 / (1 << 20)}});
}

// Clipping a shard scales it by clip_norm / (the whole gradient's norm), as clipping the whole
// gradient on one device would.
TEST(Zero1, ClippingAShardUsesTheWholeNorm) {
  GradientSet shard;
  GradientEntry e;
  e.name = "p";
  e.shape = {2};
  e.dense = at::tensor({3.f, 4.f});  // 5 of the whole gradient's 13 (5² + 12²)
  shard.add(e);
  shard.set_shard_of(169.0);
  EXPECT_DOUBLE_EQ(shard.clip_by_global_norm(1.0), 13.0);
  EXPECT_TRUE(at::allclose(shard.entries()[0].dense, at::tensor({3.f / 13, 4.f / 13})));
  EXPECT_DOUBLE_EQ(shard.global_norm(), 1.0);
}

// Rank r's chunk of the element-wise sum: rank 0 sends [1 2 | 3 4], rank 1 [10 20 | 30 40].
TEST(Communicator, ReduceScatterGivesEachRankItsChunkOfTheSum) {
  std::vector<at::Tensor> out(kWorld);
  const auto errors = on_every_rank(std::chrono::seconds(30), [&](int r, Communicator& comm) {
    const at::Tensor input = at::tensor({1.f, 2.f, 3.f, 4.f}) * (r == 0 ? 1 : 10);
    out[r] = comm.reduce_scatter_sum(input).clone();              // it may be a view of the input
    EXPECT_THROW(comm.reduce_scatter_sum(at::ones({3})), Error);  // 3 is not 2 equal chunks
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_TRUE(at::equal(out[0], at::tensor({11.f, 22.f}))) << out[0];
  EXPECT_TRUE(at::equal(out[1], at::tensor({33.f, 44.f}))) << out[1];
  EXPECT_TRUE(
      at::equal(make_local_communicator()->reduce_scatter_sum(at::ones({3})), at::ones({3})));
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
  threads.reserve(static_cast<size_t>(world));
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
