// bertlab's float32 matrix products (runtime/gemm.h): libtorch's products go through bertlab's
// sgemm_, and oneDNN's and the BLAS's results agree with a double-precision product for every
// transpose and a leading dimension larger than the matrix.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/gemm.h"
#include "test_util.h"

namespace bertlab {
namespace {

using testing::run_bertlab;

/// The largest difference from the double-precision product, over the largest magnitude.
double relative_error(const at::Tensor& product, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor exact = at::mm(a.to(at::kDouble), b.to(at::kDouble));
  return (product.to(at::kDouble) - exact).abs().max().item<double>() /
         exact.abs().max().item<double>();
}

class Gemm : public ::testing::TestWithParam<GemmBackend> {
 protected:
  void SetUp() override { set_gemm_backend(GetParam()); }
  void TearDown() override { set_gemm_backend(GemmBackend::kOneDnn); }
};

TEST_P(Gemm, LibtorchsProductsAreBertlabsAndExact) {
  at::manual_seed(3);
  const int64_t before = gemm_calls();
  // Shapes of the tiny BERT's layers and odd ones; the transposed operands are strided views,
  // which libtorch hands over as transposes ('T') with their own leading dimensions.
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {512, 128, 128}, {512, 128, 512}, {37, 53, 29}, {1, 7, 5}, {64, 1, 64}}) {
    const at::Tensor a = at::randn({m, k});
    const at::Tensor b = at::randn({k, n});
    EXPECT_LT(relative_error(at::mm(a, b), a, b), 1e-5) << m << "x" << k << "x" << n;
    const at::Tensor at_ = at::randn({k, m}).t();  // a transposed view
    const at::Tensor bt = at::randn({n, k}).t();
    EXPECT_LT(relative_error(at::mm(at_, bt), at_, bt), 1e-5) << m << "x" << k << "x" << n;
    // A leading dimension larger than the rows: columns of a wider matrix.
    const at::Tensor wide = at::randn({m, k + 9}).narrow(1, 2, k);
    EXPECT_LT(relative_error(at::mm(wide, b), wide, b), 1e-5);
    // β ≠ 0: addmm accumulates into its input.
    const at::Tensor c = at::randn({m, n});
    const at::Tensor sum = at::addmm(c, a, b, /*beta=*/0.5, /*alpha=*/2.0);
    const at::Tensor exact =
        0.5 * c.to(at::kDouble) + 2.0 * at::mm(a.to(at::kDouble), b.to(at::kDouble));
    EXPECT_LT((sum.to(at::kDouble) - exact).abs().max().item<double>(),
              1e-5 * exact.abs().max().item<double>());
  }
  EXPECT_GT(gemm_calls(), before) << "libtorch's products did not reach bertlab's sgemm_";
}

INSTANTIATE_TEST_SUITE_P(Backends, Gemm,
                         ::testing::Values(GemmBackend::kOneDnn, GemmBackend::kBlas),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The executable: oneDNN by default, the BLAS with BERTLAB_GEMM=blas, and a clear error for
// another value.
TEST(GemmBackendChoice, BertlabGemmSelectsTheBackendOfEveryProduct) {
  const auto onednn = run_bertlab({"bench", "gemm", "--size", "64", "--iters", "1"});
  ASSERT_EQ(onednn.exit_code, 0) << onednn.err;
  const auto j = nlohmann::json::parse(onednn.out);
  EXPECT_EQ(j["gemm"], "onednn");
  EXPECT_EQ(j["gemm_library"].get<std::string>().rfind("oneDNN ", 0), 0u) << j.dump();
  EXPECT_TRUE(j["through_bertlab"].get<bool>());
  const auto blas =
      run_bertlab({"bench", "gemm", "--size", "64", "--iters", "1"}, "", {"BERTLAB_GEMM=blas"});
  ASSERT_EQ(blas.exit_code, 0) << blas.err;
  EXPECT_EQ(nlohmann::json::parse(blas.out)["gemm"], "blas");
  const auto wrong = run_bertlab({"bench", "gemm"}, "", {"BERTLAB_GEMM=mkl"});
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("BERTLAB_GEMM=mkl: not a matrix-product backend; use onednn (the "
                           "default) or blas"),
            std::string::npos)
      << wrong.err;
}

}  // namespace
}  // namespace bertlab
