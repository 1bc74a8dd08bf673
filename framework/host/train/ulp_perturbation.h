// Initial weights moved by one unit in the last place: what another machine's rounding does to a
// run, made on purpose so a test can show that a regression baseline does not depend on it.

#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace bertlab {

/// Moves every nonzero floating-point parameter of each model one ulp up or down, the direction
/// of each element drawn from `seed` (a Bernoulli(1/2) stream of its own, restarted per model, so
/// every replica gets the same weights). Zeros stay: an initializer's zero (a bias) is exact on
/// every machine, and a subnormal in its place is not what another machine gives.
void perturb_by_one_ulp(const std::vector<std::shared_ptr<torch::nn::Module>>& models,
                        uint64_t seed);

}  // namespace bertlab
