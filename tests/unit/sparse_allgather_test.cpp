// sparse_allgather's dense fallback and divide_after emulation on hand-checkable gradients:
// 2 (or 3, 4) replicas as threads joined by a real Gloo process group, as in strategy_test.cpp.
// The fallback's rule (docs/gradient-averaging.md, "When sparse rows cost more than the dense
// table"): densify when N·max_rows·(H+1) > 2·V·H, max_rows counted after local coalescing. For
// the 4 × 3 table of these fixtures with N = 2: 8·max_rows > 24, so 4 rows go dense and up to 3
// stay rows.

#include <ATen/ATen.h>
#include <bertlab/collectives.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/strategy.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <thread>

#include "comm/gloo_communicator.h"
#include "runtime/plugin_host.h"
#include "runtime/registry.h"
#include "sparse_allgather.h"
#include "test_util.h"

namespace bertlab {
namespace {

using sparse_allgather::DenseFallback;
using sparse_allgather::Emulation;
using sparse_allgather::SparseAllgatherOptions;
using sparse_allgather::SparseAllgatherStrategy;

const char* const kEmbedding = "bert.embeddings.word_embeddings.weight";

/// A GradientSet of one sparse entry of `shape`: rows `values` ([nnz, H]) at `indices`.
GradientSet sparse_gradient(std::vector<int64_t> shape, const std::vector<int64_t>& indices,
                            const at::Tensor& values) {
  GradientEntry e;
  e.name = kEmbedding;
  e.shape = std::move(shape);
  e.indices = at::tensor(indices, at::kLong);
  e.values = values.view({static_cast<int64_t>(indices.size()), -1});
  GradientSet g;
  g.add(e);
  return g;
}

/// V = 4, H = 3. Rank 0 touches every row (5 rows stored, 4 after coalescing: the all-gather
/// would cost 1·4·4 = 16 values, the all-reduce 2·1/2·4·3 = 12), rank 1 two rows.
GradientSet many_rows(int rank) {
  if (rank == 0) {
    return sparse_gradient({4, 3}, {2, 0, 3, 1, 0},
                           at::tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 10.f, 11.f,
                                       12.f, 13.f, 14.f, 15.f}));
  }
  return sparse_gradient({4, 3}, {3, 1}, at::tensor({20.f, 40.f, 60.f, 2.f, 4.f, 6.f}));
}

/// By hand: rank 0 densified is [17 19 21; 10 11 12; 1 2 3; 7 8 9], rank 1 [0; 2 4 6; 0;
/// 20 40 60]; their mean (every value a multiple of 0.5, exact in float32):
at::Tensor many_rows_mean() {
  return at::tensor({8.5f, 9.5f, 10.5f, 6.f, 7.5f, 9.f, 0.5f, 1.f, 1.5f, 13.5f, 24.f, 34.5f})
      .view({4, 3});
}

/// V = 4, H = 3, one row per rank after coalescing (rank 0 stores row 2 twice): the all-gather
/// costs 1·1·4 = 4 values against the all-reduce's 12.
GradientSet one_row(int rank) {
  if (rank == 0) return sparse_gradient({4, 3}, {2, 2}, at::tensor({1.f, 2.f, 3.f, 3.f, 2.f, 1.f}));
  return sparse_gradient({4, 3}, {0}, at::tensor({6.f, 8.f, 10.f}));
}

/// By hand: rank 0 [0; 0; 4 4 4; 0], rank 1 [6 8 10; 0; 0; 0].
at::Tensor one_row_mean() {
  return at::tensor({3.f, 4.f, 5.f, 0.f, 0.f, 0.f, 2.f, 2.f, 2.f, 0.f, 0.f, 0.f}).view({4, 3});
}

/// What one rank ended with.
struct RankResult {
  GradientSet grads;
  std::string exchange;  ///< SparseAllgatherStrategy::last_exchange()
  int64_t sparse_bytes = 0;
  int64_t dense_bytes = 0;
};

/// Runs `body(rank, communicator)` on `world` thread ranks joined through one in-process store;
/// returns each rank's error message ("" when it finished).
std::vector<std::string> on_every_rank(int world,
                                       const std::function<void(int, Communicator&)>& body) {
  auto store = RendezvousStore::in_process();
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = make_gloo_communicator(*store, r, world, std::chrono::seconds(30));
        body(r, *comm);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

/// The strategy with `options` on `world` ranks, rank r starting from local(r).
std::vector<RankResult> reduce(const SparseAllgatherOptions& options,
                               const std::function<GradientSet(int)>& local, int world = 2) {
  std::vector<RankResult> out(world);
  const auto errors = on_every_rank(world, [&](int r, Communicator& comm) {
    SparseAllgatherStrategy strategy(options);
    out[r].grads = local(r);
    strategy.reduce_gradients(out[r].grads, comm);
    out[r].exchange = strategy.last_exchange();
    out[r].sparse_bytes = comm.traffic_bytes(Traffic::kSparse);
    out[r].dense_bytes = comm.traffic_bytes(Traffic::kDense);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return out;
}

SparseAllgatherOptions with(DenseFallback fallback, Emulation emulate = Emulation::kNone,
                            WireFormat wire = WireFormat::kFloat32) {
  SparseAllgatherOptions o;
  o.dense_fallback = fallback;
  o.emulate = emulate;
  o.wire = wire;
  return o;
}

/// The registered plugin, built from its declared options, on 2 ranks: the same options parsed
/// as bertlab's configuration would.
std::vector<GradientSet> reduce_through_plugin(std::map<std::string, OptionValue> options,
                                               const std::function<GradientSet(int)>& local) {
  const Component* c = bertlab::testing::builtin_plugins().registry().find(ComponentKind::kStrategy,
                                                                           "sparse_allgather");
  EXPECT_NE(c, nullptr);
  ConfigView view("strategy", c->spec.options, std::move(options));
  std::vector<GradientSet> out(2);
  const auto errors = on_every_rank(2, [&](int r, Communicator& comm) {
    auto strategy = c->strategy_factory(view);
    out[r] = local(r);
    strategy->reduce_gradients(out[r], comm);
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return out;
}

TEST(SparseAllgatherCost, TheRuleInIntegersWithTiesGoingToRows) {
  // V = 4, H = 3, N = 2: rows cost (N−1)·m·(H+1) = 4m values, the all-reduce 2(N−1)/N·V·H = 12.
  EXPECT_FALSE(sparse_allgather::dense_is_cheaper(3, 4, 3, 2));     // 12 = 12: rows
  EXPECT_TRUE(sparse_allgather::dense_is_cheaper(4, 4, 3, 2));      // 16 > 12
  EXPECT_FALSE(sparse_allgather::dense_is_cheaper(4096, 4, 3, 1));  // one rank: nothing to send
  const auto cost = sparse_allgather::exchange_cost(4, 4, 3, 2);
  EXPECT_EQ(cost.rows, 16);
  EXPECT_EQ(cost.dense, 12);
  // BERT-Base's word embedding, 4096 distinct tokens per replica: rows until N = 8, dense from
  // N = 16 (docs/gradient-averaging.md's table).
  EXPECT_FALSE(sparse_allgather::dense_is_cheaper(4096, 30522, 768, 8));
  EXPECT_TRUE(sparse_allgather::dense_is_cheaper(4096, 30522, 768, 16));
}

TEST(SparseAllgather, AutoDensifiesAFullTableAndGivesTheMeanByHand) {
  const auto results = reduce(with(DenseFallback::kAuto), many_rows);
  for (int r = 0; r < 2; ++r) {
    const GradientEntry& e = results[r].grads.entries().at(0);
    EXPECT_FALSE(e.is_sparse()) << "rank " << r;
    EXPECT_TRUE(at::equal(e.to_dense(), many_rows_mean())) << "rank " << r << "\n" << e.to_dense();
    EXPECT_EQ(results[r].exchange, "dense");
    // The table all-reduced, 4·3 float32 (as dense traffic); only the counts (one int64) as rows.
    EXPECT_EQ(results[r].dense_bytes, 4 * 3 * 4);
    EXPECT_EQ(results[r].sparse_bytes, 8);
  }
}

TEST(SparseAllgather, AutoGathersOneRowAndGivesTheMeanByHand) {
  const auto results = reduce(with(DenseFallback::kAuto), one_row);
  for (int r = 0; r < 2; ++r) {
    const GradientEntry& e = results[r].grads.entries().at(0);
    ASSERT_TRUE(e.is_sparse()) << "rank " << r;
    EXPECT_TRUE(at::equal(e.indices, at::tensor({0, 2}, at::kLong))) << e.indices;
    EXPECT_TRUE(at::equal(e.to_dense(), one_row_mean())) << "rank " << r << "\n" << e.to_dense();
    EXPECT_EQ(results[r].exchange, "rows");
    // The count (int64), then one padded row: an int64 index and 3 float32 values.
    EXPECT_EQ(results[r].sparse_bytes, 8 + 8 + 3 * 4);
    EXPECT_EQ(results[r].dense_bytes, 0);
  }
}

TEST(SparseAllgather, NeverGathersRowsEvenWhenTheTableIsCheaper) {
  const auto results = reduce(with(DenseFallback::kNever), many_rows);
  for (int r = 0; r < 2; ++r) {
    const GradientEntry& e = results[r].grads.entries().at(0);
    ASSERT_TRUE(e.is_sparse()) << "rank " << r;
    EXPECT_TRUE(at::equal(e.indices, at::tensor({0, 1, 2, 3}, at::kLong))) << e.indices;
    // The same mean as the dense exchange, bit for bit.
    EXPECT_TRUE(at::equal(e.to_dense(), many_rows_mean())) << "rank " << r << "\n" << e.to_dense();
    EXPECT_EQ(results[r].exchange, "rows");
    EXPECT_EQ(results[r].dense_bytes, 0);
    // The count, then 4 rows (the larger count) of an int64 index and 3 float32 values.
    EXPECT_EQ(results[r].sparse_bytes, 8 + 4 * 8 + 4 * 3 * 4);
  }
  const auto one = reduce(with(DenseFallback::kNever), one_row);
  EXPECT_EQ(one[0].exchange, "rows");
  EXPECT_TRUE(at::equal(one[0].grads.entries().at(0).to_dense(), one_row_mean()));
}

TEST(SparseAllgather, EmulationsAlwaysSendRows) {
  // An emulation reproduces its published exchange, whatever the fallback says.
  const auto results = reduce(with(DenseFallback::kAuto, Emulation::kDivideAfter), many_rows);
  EXPECT_EQ(results[0].exchange, "rows");
  EXPECT_TRUE(results[0].grads.entries().at(0).is_sparse());
}

TEST(SparseAllgather, ThePluginDeclaresDenseFallbackAndDivideAfter) {
  auto dense = reduce_through_plugin({}, many_rows);  // "auto" by default
  EXPECT_FALSE(dense[0].entries().at(0).is_sparse());
  EXPECT_TRUE(at::equal(dense[0].entries().at(0).to_dense(), many_rows_mean()));
  auto rows = reduce_through_plugin({{"dense_fallback", std::string("never")}}, many_rows);
  EXPECT_TRUE(rows[0].entries().at(0).is_sparse());
  EXPECT_TRUE(at::equal(rows[0].entries().at(0).to_dense(), many_rows_mean()));
  auto after = reduce_through_plugin({{"emulate", std::string("divide_after")}}, many_rows);
  EXPECT_TRUE(at::equal(after[0].entries().at(0).to_dense(), many_rows_mean()));
}

/// V = 6, H = 4: 8 rows per rank (rows k + rank mod 6: every rank touches every row, two of
/// them twice), of values spread over five decades (sin(·) times 0.01 to 100) so that the
/// sums round.
GradientSet spread_rows(int rank) {
  std::vector<int64_t> indices;
  std::vector<float> values;
  for (int k = 0; k < 8; ++k) {
    indices.push_back((k + rank) % 6);
    for (int j = 0; j < 4; ++j) {
      values.push_back(
          static_cast<float>(std::sin(1.0 + 4 * k + j + 100.0 * rank) * std::pow(10.0, k % 5 - 2)));
    }
  }
  return sparse_gradient({6, 4}, indices, at::tensor(values));
}

// Dividing by N = 2 or 4 only lowers the exponent, so g/N is exact and the sum of the shares is
// the share of the sum, rounded alike: with the same rows summed in the same order, divide_after
// is bitwise the default (barring overflow and subnormals, below).
TEST(SparseAllgather, DivideAfterIsBitwiseTheDefaultForTwoAndFourRanks) {
  for (int world : {2, 4}) {
    const auto before = reduce(with(DenseFallback::kNever), spread_rows, world);
    const auto after =
        reduce(with(DenseFallback::kNever, Emulation::kDivideAfter), spread_rows, world);
    const at::Tensor a = before[0].grads.entries().at(0).to_dense();
    const at::Tensor b = after[0].grads.entries().at(0).to_dense();
    EXPECT_TRUE(at::equal(a, b)) << "N = " << world << "\n" << a << "\n" << b;
  }
}

// With N = 3 the division rounds: the default rounds each of the N shares and then N − 1 sums,
// divide_after N − 1 sums and then the mean. Both are within float32 rounding of the exact mean:
// element-wise |difference| <= 2N·2^-24·(1/N)·Σ|g_i| (the contract's bounded form).
TEST(SparseAllgather, DivideAfterIsWithinFloat32RoundingOfTheDefaultForThreeRanks) {
  const int world = 3;
  const auto before = reduce(with(DenseFallback::kNever), spread_rows, world);
  const auto after =
      reduce(with(DenseFallback::kNever, Emulation::kDivideAfter), spread_rows, world);
  at::Tensor mean_abs = at::zeros({6, 4});
  for (int r = 0; r < world; ++r) {
    GradientEntry e = spread_rows(r).entries().at(0);
    e.values = e.values.abs();
    mean_abs += e.to_dense() / world;
  }
  const at::Tensor a = before[0].grads.entries().at(0).to_dense();
  const at::Tensor b = after[0].grads.entries().at(0).to_dense();
  const at::Tensor bound = mean_abs * (2 * world * std::ldexp(1.0, -24));
  EXPECT_TRUE(((a - b).abs() <= bound).all().item<bool>()) << a - b;
  // Not vacuous: with these values 15 of the 24 elements differ, by at most 2^-19 (one ulp in [4,
  // 8)).
  EXPECT_GT((a != b).sum().item<int64_t>(), 0);
}

/// One row of one value, `v` on both ranks.
std::function<GradientSet(int)> both_ranks(float v) {
  return [v](int) { return sparse_gradient({2, 1}, {0}, at::tensor({v})); };
}

// Where it does differ: the sum overflows before the division (a mean above float32's largest
// over N), and shares below the smallest normal number lose bits that the mean keeps.
TEST(SparseAllgather, DivideAfterDiffersOnlyAtOverflowAndUnderflow) {
  const SparseAllgatherOptions before = with(DenseFallback::kNever);
  const SparseAllgatherOptions after = with(DenseFallback::kNever, Emulation::kDivideAfter);
  // 3e38 + 3e38 overflows; 1.5e38 + 1.5e38 does not.
  const float big = 3e38f;
  EXPECT_EQ(reduce(before, both_ranks(big))[0].grads.entries()[0].to_dense()[0][0].item<float>(),
            big);
  EXPECT_TRUE(std::isinf(
      reduce(after, both_ranks(big))[0].grads.entries()[0].to_dense()[0][0].item<float>()));
  // The smallest subnormal, 2^-149: its half rounds (to even) to 0 on each rank, while
  // 2^-148 / 2 is exactly 2^-149, the true mean.
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(reduce(before, both_ranks(tiny))[0].grads.entries()[0].to_dense()[0][0].item<float>(),
            0.f);
  EXPECT_EQ(reduce(after, both_ranks(tiny))[0].grads.entries()[0].to_dense()[0][0].item<float>(),
            tiny);
}

/// V = 2, H = 1: rank 0 has rows 0 and 1 (3 and 5), rank 1 row 0 (2 + 2^-6).
GradientSet wire_rows(int rank) {
  if (rank == 0) return sparse_gradient({2, 1}, {0, 1}, at::tensor({3.f, 5.f}));
  return sparse_gradient({2, 1}, {0}, at::tensor({2.f + 1.f / 64}));
}

// By hand, N = 2. Row 0's shares are 1.5 and 1 + 2^-7, exact in both 16-bit types; their sum
// 2.5 + 2^-7 is exact in float16 (spacing 2^-9 in [2, 4)) and a tie in bfloat16 (spacing 2^-6),
// which rounds to the even 2.5. Row 1, on rank 0 only, is 2.5 in both.
TEST(SparseAllgather, CompressedRowsAreSummedAsTheirWireTypeAddsByHand) {
  const auto fp16 =
      reduce(with(DenseFallback::kNever, Emulation::kNone, WireFormat::kFloat16), wire_rows);
  const auto bf16 =
      reduce(with(DenseFallback::kNever, Emulation::kNone, WireFormat::kBFloat16), wire_rows);
  const auto fp32 = reduce(with(DenseFallback::kNever), wire_rows);
  for (int r = 0; r < 2; ++r) {
    const GradientEntry& e = fp16[r].grads.entries().at(0);
    ASSERT_TRUE(e.is_sparse());
    EXPECT_EQ(e.values.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(e.to_dense(), at::tensor({2.5078125f, 2.5f}).view({2, 1})))
        << e.to_dense();
    EXPECT_TRUE(
        at::equal(bf16[r].grads.entries().at(0).to_dense(), at::tensor({2.5f, 2.5f}).view({2, 1})))
        << bf16[r].grads.entries().at(0).to_dense();
    // The count, then 2 padded rows: int64 indices and 16-bit values (float32: 4 bytes each).
    EXPECT_EQ(fp16[r].sparse_bytes, 8 + 2 * 8 + 2 * 2);
    EXPECT_EQ(bf16[r].sparse_bytes, 8 + 2 * 8 + 2 * 2);
    EXPECT_EQ(fp32[r].sparse_bytes, 8 + 2 * 8 + 2 * 4);
  }
}

// PyTorch #61814's report: with float16 on the wire the sparse sum, divided after, overflows
// (20000 + 20000 = 40000 is finite; 40000 + 40000 is past 65504), while the fixed path's
// shares do not. In bfloat16, float32's range, there is no such overflow, and for N = 2 and 4
// the division commutes with every rounding: divide_after is bitwise the fix.
TEST(SparseAllgather, DivideAfterOverflowsInFloat16AndIsTheFixInBFloat16) {
  const auto fixed = reduce(with(DenseFallback::kNever, Emulation::kNone, WireFormat::kFloat16),
                            both_ranks(40000.f));
  const auto after =
      reduce(with(DenseFallback::kNever, Emulation::kDivideAfter, WireFormat::kFloat16),
             both_ranks(40000.f));
  EXPECT_EQ(fixed[0].grads.entries()[0].to_dense()[0][0].item<float>(), 40000.f);
  EXPECT_TRUE(std::isinf(after[0].grads.entries()[0].to_dense()[0][0].item<float>()));
  for (int world : {2, 4}) {
    const auto a = reduce(with(DenseFallback::kNever, Emulation::kNone, WireFormat::kBFloat16),
                          spread_rows, world);
    const auto b =
        reduce(with(DenseFallback::kNever, Emulation::kDivideAfter, WireFormat::kBFloat16),
               spread_rows, world);
    EXPECT_TRUE(at::equal(a[0].grads.entries()[0].to_dense(), b[0].grads.entries()[0].to_dense()))
        << "N = " << world;
  }
}

// N = 3 in bfloat16: the fix rounds each share g/3 to 8 bits, divide_after rounds g and divides
// the sum, so they differ, each within the bound the bf16 contract states (dense_reduce_contract:
// rtol γ_N + 2^-24 of the mean of |g|), measured against the exact mean in double.
TEST(SparseAllgather, DivideAfterInBFloat16ForThreeRanksDiffersWithinTheBound) {
  const int world = 3;
  const auto fixed = reduce(with(DenseFallback::kNever, Emulation::kNone, WireFormat::kBFloat16),
                            spread_rows, world);
  const auto after =
      reduce(with(DenseFallback::kNever, Emulation::kDivideAfter, WireFormat::kBFloat16),
             spread_rows, world);
  at::Tensor mean = at::zeros({6, 4}, at::kDouble);
  at::Tensor mean_abs = at::zeros({6, 4}, at::kDouble);
  for (int r = 0; r < world; ++r) {
    const at::Tensor g = spread_rows(r).entries().at(0).to_dense().to(at::kDouble);
    mean += g / world;
    mean_abs += g.abs() / world;
  }
  const StrategyContract contract = dense_reduce_contract(WireFormat::kBFloat16, world);
  const at::Tensor bound = mean_abs * contract.rtol + contract.atol;
  const at::Tensor a = fixed[0].grads.entries()[0].to_dense().to(at::kDouble);
  const at::Tensor b = after[0].grads.entries()[0].to_dense().to(at::kDouble);
  EXPECT_TRUE(((a - mean).abs() <= bound).all().item<bool>()) << a - mean;
  EXPECT_TRUE(((b - mean).abs() <= bound).all().item<bool>()) << b - mean;
  EXPECT_GT((a != b).sum().item<int64_t>(), 0);
}

TEST(SparseAllgather, ThePluginSendsCompressedRowsAndRefusesWhatCannotBeCompressed) {
  auto fp16 = reduce_through_plugin(
      {{"compression", std::string("fp16")}, {"dense_fallback", std::string("never")}}, wire_rows);
  EXPECT_TRUE(
      at::equal(fp16[0].entries().at(0).to_dense(), at::tensor({2.5078125f, 2.5f}).view({2, 1})));
  const Component* c = bertlab::testing::builtin_plugins().registry().find(ComponentKind::kStrategy,
                                                                           "sparse_allgather");
  ASSERT_NE(c, nullptr);
  const ConfigView no_divide(
      "strategy", c->spec.options,
      {{"compression", std::string("bf16")}, {"emulate", std::string("no_divide")}});
  EXPECT_THROW(c->strategy_factory(no_divide), ConfigError);
  const ConfigView overlap("strategy", c->spec.options,
                           {{"compression", std::string("fp16")}, {"overlap_backward", true}});
  EXPECT_THROW(c->strategy_factory(overlap), ConfigError);
  // The contract follows the wire: bounded with 16 bits, exact in float32.
  const ConfigView bf16("strategy", c->spec.options, {{"compression", std::string("bf16")}});
  EXPECT_EQ(c->spec.contract(bf16, 2).kind, ContractKind::kBounded);
  const ConfigView none("strategy", c->spec.options, {});
  EXPECT_EQ(c->spec.contract(none, 2).kind, ContractKind::kExact);
}

}  // namespace
}  // namespace bertlab
