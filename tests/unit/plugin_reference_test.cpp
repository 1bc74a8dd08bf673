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

// docs/strategy-contracts.md's table of the built-in strategies' contracts has a row for every
// strategy `bertlab plugins` lists, and each row names the kind and the invariants that
// `plugins --describe` prints for the default options.
TEST(PluginReference, TheContractsTableInTheDocsMatchesDescribe) {
  const std::string doc =
      testing::read_file(fs::path(BERTLAB_SOURCE_DIR) / "docs" / "strategy-contracts.md");
  int strategies = 0;
  for (const auto& [kind, name] : listed_components()) {
    if (kind != "strategy") continue;
    ++strategies;
    const std::string key = "\n| `" + name + "` | ";
    const size_t at = doc.find(key);
    ASSERT_NE(at, std::string::npos) << "docs/strategy-contracts.md has no row for " << name;
    const std::string row = doc.substr(at + key.size(), doc.find('\n', at + 1) - at - key.size());
    auto described = run_bertlab({"plugins", "--describe", name});
    ASSERT_EQ(described.exit_code, 0) << described.err;
    const size_t c = described.out.find("contract (docs/strategy-contracts.md):\n  ");
    ASSERT_NE(c, std::string::npos) << described.out;
    const size_t start = c + std::string("contract (docs/strategy-contracts.md):\n  ").size();
    std::string summary =
        described.out.substr(start, described.out.find(" (default", start) - start);
    // "exact_until(step 0) + error_feedback_conserves": the kind, then each invariant.
    std::istringstream parts(summary);
    std::string part;
    bool first = true;
    while (std::getline(parts, part, '+')) {
      part.erase(0, part.find_first_not_of(' '));
      part = part.substr(0, part.find_first_of(" ("));
      EXPECT_NE(row.find(part), std::string::npos)
          << name << ": the docs say '" << row << "', describe '" << summary << "'";
      if (first) {
        EXPECT_EQ(row.rfind(part, 0), 0u) << name << ": the row should start with its kind";
      }
      first = false;
    }
  }
  EXPECT_GE(strategies, 6);
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
