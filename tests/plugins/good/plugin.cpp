// An out-of-tree plugin that loads cleanly: a strategy with options and a tool.
#include <bertlab/communicator.h>
#include <bertlab/grad.h>
#include <bertlab/plugin.h>
#include <bertlab/strategy.h>

#include <iostream>

namespace {

class IdentityStrategy final : public bertlab::Strategy {
 public:
  void reduce_gradients(bertlab::GradientSet&, bertlab::Communicator&) override {}
};

void register_components(bertlab::Registry& registry) {
  registry.add_strategy(
      bertlab::ComponentSpec{
          "test_identity",
          "test plugin: leaves the gradients as they are",
          {bertlab::int_option("answer", 42, "an option to describe").in_range(0, 100)},
          /*contract=*/{}},
      [](const bertlab::ConfigView&) { return std::make_unique<IdentityStrategy>(); });
  registry.add_tool("testtool", "echo", "prints its arguments",
                    [](const std::vector<std::string>& args) {
                      for (const auto& a : args) std::cout << a << "\n";
                      return 0;
                    });
}

}  // namespace

BERTLAB_PLUGIN("good", "1.2.3", register_components)
