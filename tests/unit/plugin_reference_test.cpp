// `bertlab plugins --describe --all`: every component's options from their declarations, and
// docs/plugin-reference.md, which is that output in markdown and must not fall behind the code.

#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::run_bertlab;

/// The in-tree components, as `bertlab plugins` lists them: (kind, name).
std::vector<std::pair<std::string, std::string>> listed_components() {
  auto r = run_bertlab({"plugins"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string kind, name;
    words >> kind >> name;
    if (kind != "tool") out.emplace_back(kind, name);
  }
  return out;
}

TEST(PluginReference, DescribeAllShowsEveryComponentWithItsOptions) {
  const auto components = listed_components();
  ASSERT_GE(components.size(), 10u);
  auto text = run_bertlab({"plugins", "--describe", "--all"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  auto md = run_bertlab({"plugins", "--describe", "--all", "--format", "markdown"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  for (const auto& [kind, name] : components) {
    EXPECT_NE(text.out.find(kind + " '" + name + "': "), std::string::npos) << name;
    EXPECT_NE(md.out.find("### " + kind + " `" + name + "`"), std::string::npos) << name;
  }
  // Options with type, default, rule and doc, from the declarations (a `|` in a rule escaped).
  EXPECT_NE(text.out.find("bucket_mb"), std::string::npos) << text.out;
  EXPECT_NE(md.out.find("| `bucket_mb` | float | `25.0` | > 0 | MiB of gradients per all-reduce |"),
            std::string::npos)
      << md.out;
  EXPECT_NE(md.out.find("one of cola\\|sst2"), std::string::npos) << md.out;
  // Host keys once per kind, and the tools plugins contribute.
  EXPECT_NE(md.out.find("| `replicas` | int |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("`bertlab squad evaluate`"), std::string::npos) << md.out;
  // No file paths: every checkout generates the same reference.
  EXPECT_EQ(md.out.find(BERTLAB_BUILD_DIR), std::string::npos) << md.out;
  EXPECT_NE(text.out.find(BERTLAB_BUILD_DIR), std::string::npos) << text.out;
}

TEST(PluginReference, DescribeNeedsANameOrAllAndAKnownFormat) {
  auto none = run_bertlab({"plugins", "--describe"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("name a component, or pass --all"), std::string::npos) << none.err;
  auto format = run_bertlab({"plugins", "--describe", "--all", "--format", "html"});
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_NE(format.err.find("plugins --format: 'html' is not a format; use text or markdown"),
            std::string::npos)
      << format.err;
  auto one = run_bertlab({"plugins", "--describe", "mirrored", "--format", "markdown"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("### strategy `mirrored`"), std::string::npos) << one.out;
}

TEST(PluginReference, CheckedInReferenceIsCurrent) {
  auto md = run_bertlab({"plugins", "--describe", "--all", "--format", "markdown"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  const fs::path checked_in = fs::path(BERTLAB_SOURCE_DIR) / "docs" / "plugin-reference.md";
  ASSERT_TRUE(fs::exists(checked_in)) << checked_in;
  const std::string expected = testing::read_file(checked_in);
  if (md.out == expected) return;
  // The first line that differs, so the failure says what changed.
  std::istringstream got_lines(md.out), want_lines(expected);
  std::string got, want;
  int line = 0;
  while (true) {
    ++line;
    const bool more_got = static_cast<bool>(std::getline(got_lines, got));
    const bool more_want = static_cast<bool>(std::getline(want_lines, want));
    if (!more_got && !more_want) break;
    if (!more_got) got = "(end of output)";
    if (!more_want) want = "(end of file)";
    if (got != want || !more_got || !more_want) break;
  }
  FAIL() << checked_in.string() << " is out of date with the plugins' option declarations "
         << "(first difference at line " << line << ":\n  checked in: " << want
         << "\n  generated:  " << got << ")\nRegenerate it from the top of the checkout with\n"
         << "  build/bin/bertlab plugins --describe --all --format markdown > "
            "docs/plugin-reference.md\nand commit it.";
}

}  // namespace
}  // namespace bertlab
