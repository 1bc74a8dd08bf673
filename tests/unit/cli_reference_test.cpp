// docs/cli.md is `bertlab --cli-reference`: every command's help, generated from the definitions
// that parse the command line, and it must not fall behind them.

#include <gtest/gtest.h>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::run_bertlab;

TEST(CliReference, ListsEveryCommandWithItsFlags) {
  const auto r = run_bertlab({"--cli-reference"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* heading : {"## bertlab run", "## bertlab bench step", "## bertlab launch",
                              "## bertlab compare", "## bertlab plugins"}) {
    EXPECT_NE(r.out.find(std::string("\n") + heading + "\n"), std::string::npos) << heading;
  }
  EXPECT_NE(r.out.find("--hidden-size"), std::string::npos);
  EXPECT_NE(r.out.find("squad train"), std::string::npos) << "the plugin tools are listed";
}

TEST(CliReference, CheckedInReferenceIsCurrent) {
  const auto r = run_bertlab({"--cli-reference"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path checked_in = fs::path(BERTLAB_SOURCE_DIR) / "docs" / "cli.md";
  EXPECT_EQ(read_file(checked_in), r.out)
      << "docs/cli.md is stale; regenerate it: build/bin/bertlab --cli-reference > docs/cli.md";
}

}  // namespace
}  // namespace bertlab
