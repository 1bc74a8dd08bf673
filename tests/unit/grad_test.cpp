// GradientSet: collection from a module, coalescing, densifying, norms and clipping.

#include <bertlab/grad.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

namespace bertlab {
namespace {

at::Tensor floats(const std::vector<float>& values, const std::vector<int64_t>& shape) {
  return at::tensor(values, at::kFloat).reshape(shape);
}

at::Tensor longs(const std::vector<int64_t>& values) { return at::tensor(values, at::kLong); }

// A 4x2 embedding gradient with row 1 stored twice, plus a dense 3-vector.
//   rows: 1 -> [1, 2], 3 -> [0, 1], 1 -> [3, -1]
//   dense form: row 1 = [4, 1], row 3 = [0, 1], rows 0 and 2 zero
GradientSet example_set() {
  GradientSet set;
  GradientEntry sparse;
  sparse.name = "embeddings.word_embeddings.weight";
  sparse.shape = {4, 2};
  sparse.indices = longs({1, 3, 1});
  sparse.values = floats({1, 2, 0, 1, 3, -1}, {3, 2});
  set.add(sparse);
  GradientEntry dense;
  dense.name = "pooler.dense.bias";
  dense.shape = {3};
  dense.dense = floats({2, 0, -2}, {3});
  set.add(dense);
  return set;
}

TEST(GradientSet, DenseFormSumsDuplicates) {
  GradientSet set = example_set();
  at::Tensor dense = set.entries()[0].to_dense();
  EXPECT_TRUE(at::equal(dense, floats({0, 0, 4, 1, 0, 0, 0, 1}, {4, 2})));
}

TEST(GradientSet, CoalesceSumsAndSorts) {
  GradientSet set = example_set();
  at::Tensor before = set.entries()[0].to_dense();
  set.coalesce();
  const GradientEntry& e = set.entries()[0];
  ASSERT_TRUE(e.is_sparse());
  EXPECT_TRUE(at::equal(e.indices, longs({1, 3})));
  EXPECT_TRUE(at::equal(e.values, floats({4, 1, 0, 1}, {2, 2})));
  EXPECT_TRUE(at::equal(e.to_dense(), before));
  EXPECT_FALSE(set.entries()[1].is_sparse());
}

TEST(GradientSet, DensifyKeepsValue) {
  GradientSet set = example_set();
  set.densify();
  const GradientEntry& e = set.entries()[0];
  ASSERT_FALSE(e.is_sparse());
  EXPECT_FALSE(e.indices.defined());
  EXPECT_TRUE(at::equal(e.dense, floats({0, 0, 4, 1, 0, 0, 0, 1}, {4, 2})));
}

TEST(GradientSet, GlobalNormModes) {
  GradientSet set = example_set();
  // Coalesced: rows [4, 1] and [0, 1] -> 16 + 1 + 0 + 1 = 18; dense 4 + 0 + 4 = 8.
  EXPECT_DOUBLE_EQ(set.global_norm(NormMode::kCoalesced), std::sqrt(26.0));
  // Uncoalesced: [1, 2], [0, 1], [3, -1] -> 1 + 4 + 0 + 1 + 9 + 1 = 16; dense 8.
  EXPECT_DOUBLE_EQ(set.global_norm(NormMode::kUncoalesced), std::sqrt(24.0));
  // The coalesced norm must not change the entry.
  EXPECT_EQ(set.entries()[0].indices.numel(), 3);
  // After coalescing both modes agree.
  set.coalesce();
  EXPECT_DOUBLE_EQ(set.global_norm(NormMode::kUncoalesced), std::sqrt(26.0));
  set.densify();
  EXPECT_DOUBLE_EQ(set.global_norm(NormMode::kCoalesced), std::sqrt(26.0));
}

TEST(GradientSet, GlobalNormIsAccurateForLargeTensors) {
  GradientSet set;
  GradientEntry e;
  e.name = "big";
  e.shape = {1 << 22};
  e.dense = at::full({1 << 22}, 0.1f);
  set.add(e);
  const double expected = std::sqrt(static_cast<double>(1 << 22)) * static_cast<double>(0.1f);
  EXPECT_NEAR(set.global_norm() / expected, 1.0, 1e-6);
}

TEST(GradientSet, ScaleAndClip) {
  GradientSet set = example_set();
  set.scale(0.5);
  EXPECT_TRUE(at::equal(set.entries()[0].values, floats({0.5, 1, 0, 0.5, 1.5, -0.5}, {3, 2})));
  EXPECT_TRUE(at::equal(set.entries()[1].dense, floats({1, 0, -1}, {3})));

  // Below the threshold nothing changes and the norm is reported.
  GradientSet small = example_set();
  EXPECT_DOUBLE_EQ(small.clip_by_global_norm(10.0), std::sqrt(26.0));
  EXPECT_TRUE(at::equal(small.entries()[1].dense, floats({2, 0, -2}, {3})));

  // Above it: t * clip_norm / norm, so the new norm is clip_norm.
  GradientSet big = example_set();
  const double norm = big.clip_by_global_norm(1.0);
  EXPECT_DOUBLE_EQ(norm, std::sqrt(26.0));
  EXPECT_NEAR(big.global_norm(), 1.0, 1e-6);
  EXPECT_TRUE(at::allclose(big.entries()[1].dense, floats({2, 0, -2}, {3}) / std::sqrt(26.0)));

  // Uncoalesced mode clips by the uncoalesced norm.
  GradientSet tf = example_set();
  EXPECT_DOUBLE_EQ(tf.clip_by_global_norm(1.0, NormMode::kUncoalesced), std::sqrt(24.0));
  EXPECT_NEAR(tf.global_norm(NormMode::kUncoalesced), 1.0, 1e-6);
}

struct TinyModelImpl : torch::nn::Module {
  TinyModelImpl() {
    emb = register_module("emb",
                          torch::nn::Embedding(torch::nn::EmbeddingOptions(5, 3).sparse(true)));
    proj = register_module("proj", torch::nn::Linear(3, 2));
    unused = register_module("unused", torch::nn::Linear(2, 2));
  }
  torch::nn::Embedding emb{nullptr};
  torch::nn::Linear proj{nullptr}, unused{nullptr};
};

TEST(GradientSet, FromModuleKeepsSparseRowsAndOrder) {
  auto model = std::make_shared<TinyModelImpl>();
  at::Tensor ids = longs({2, 4, 2});
  at::Tensor out = model->proj->forward(model->emb->forward(ids));
  out.sum().backward();

  GradientSet set = GradientSet::from_module(*model);
  std::vector<std::string> names;
  for (const auto& e : set.entries()) names.push_back(e.name);
  // No gradient (unused by the loss): no entry, as TensorFlow's None gradient.
  EXPECT_EQ(names, (std::vector<std::string>{"emb.weight", "proj.weight", "proj.bias"}));
  const GradientEntry& emb = set.entries()[0];
  ASSERT_TRUE(emb.is_sparse());
  EXPECT_EQ(emb.indices.numel(), 3);  // uncoalesced: row 2 twice
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{5, 3}));
  EXPECT_TRUE(at::allclose(emb.to_dense(), model->emb->weight.grad().to_dense()));
  // The dense gradient is shared with the module, not copied.
  EXPECT_TRUE(set.entries()[1].dense.is_same(model->proj->weight.grad()));
  EXPECT_EQ(set.find("unused.weight"), nullptr);
  EXPECT_NE(set.find("proj.bias"), nullptr);
  EXPECT_EQ(set.find("missing"), nullptr);
}

}  // namespace
}  // namespace bertlab
