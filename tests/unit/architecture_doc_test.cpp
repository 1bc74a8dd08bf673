// docs/architecture.md, the design of record, against the code: the commands it lists are the
// executable's (built-in and plugin tools), and the output files it lists are what a run writes.

#include <fnmatch.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;

std::string architecture_doc() {
  return read_file(fs::path(BERTLAB_SOURCE_DIR) / "docs" / "architecture.md");
}

/// The text of section `heading` ("## Commands"), up to the next "## ".
std::string section(const std::string& doc, const std::string& heading) {
  const size_t begin = doc.find("\n" + heading + "\n");
  EXPECT_NE(begin, std::string::npos) << "docs/architecture.md has no " << heading;
  if (begin == std::string::npos) return "";
  const size_t end = doc.find("\n## ", begin + 1);
  return doc.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

/// The commands of the doc's tables: "| `bertlab NAME...` |" rows.
std::set<std::string> documented_commands() {
  const std::string text = section(architecture_doc(), "## Commands");
  const std::regex row(R"(\| `bertlab ([a-z0-9 -]+)` \|)");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), row); it != std::sregex_iterator();
       ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

/// The executable's: `bertlab --help`'s subcommands and the plugin tools it lists.
std::set<std::string> executable_commands() {
  const auto r = run_bertlab({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> out;
  std::istringstream lines(r.out);
  std::string line;
  enum { kNone, kSubcommands, kTools } part = kNone;
  const std::regex entry(R"(^  ([a-z0-9-]+( [a-z0-9-]+)?)  +\S.*)");
  while (std::getline(lines, line)) {
    if (line.rfind("Subcommands:", 0) == 0) part = kSubcommands;
    if (line.rfind("Plugin tools", 0) == 0) part = kTools;
    std::smatch m;
    if (part != kNone && std::regex_match(line, m, entry)) {
      std::string name = m[1];
      if (part == kSubcommands) name = name.substr(0, name.find(' '));
      out.insert(name);
    }
  }
  return out;
}

TEST(ArchitectureDoc, CommandsAreTheExecutablesCommands) {
  const auto documented = documented_commands();
  const auto actual = executable_commands();
  EXPECT_GE(actual.size(), 15u) << "bertlab --help lists too little; did its format change?";
  for (const auto& c : actual) {
    EXPECT_TRUE(documented.count(c))
        << "`bertlab " << c << "` is missing from docs/architecture.md's Commands";
  }
  for (const auto& c : documented) {
    EXPECT_TRUE(actual.count(c)) << "docs/architecture.md lists `bertlab " << c
                                 << "`, which bertlab --help does not";
  }
}

/// The doc's list of `folder`'s entries ("- `NAME`" lines after the "In `folder`:" line): the
/// names, `*` as a wildcard, folders with a trailing '/'.
std::vector<std::string> documented_outputs(const std::string& folder) {
  const std::string text = section(architecture_doc(), "## Output files");
  const size_t begin = text.find("In `" + folder + "`:");
  EXPECT_NE(begin, std::string::npos) << folder;
  std::vector<std::string> out;
  if (begin == std::string::npos) return out;
  std::istringstream lines(text.substr(begin));
  std::string line;
  std::getline(lines, line);
  const std::regex item(R"(^- `([^`]+)`.*)");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, item)) out.push_back(m[1]);
    if (line.rfind("In `", 0) == 0) break;
  }
  return out;
}

bool matches(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

/// Every entry of `dir` is listed (a variant's folder as VARIANT/), and every listed entry that
/// the run was configured to write is there.
void expect_listed(const fs::path& dir, const std::vector<std::string>& listed,
                   const std::set<std::string>& variants) {
  std::set<std::string> present;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (e.is_directory()) name = variants.count(name) ? "VARIANT/" : name + "/";
    present.insert(name);
    bool found = false;
    for (const auto& p : listed) found |= matches(p, name);
    EXPECT_TRUE(found) << dir / name << " is not in docs/architecture.md's Output files";
  }
  for (const auto& p : listed) {
    if (p == "init_report.json") continue;  // only with init_checkpoint
    bool found = false;
    for (const auto& name : present) found |= matches(p, name);
    EXPECT_TRUE(found) << "docs/architecture.md lists " << p << "; the run wrote no such file in "
                       << dir;
  }
}

TEST(ArchitectureDoc, OutputFilesAreWhatARunWrites) {
  TempDir dir;
  const auto r =
      run_bertlab({"run", data_path("experiments/overfit.toml").string(), "--output-dir",
                   dir.path().string(), "--set", "train.num_train_steps=4", "--set",
                   "train.log_every_steps=2", "--set", "train.save_checkpoints_steps=2", "--set",
                   "experiment.tensorboard=true", "--set", "experiment.export_hf=true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path experiment = dir.path() / "overfit";
  expect_listed(experiment, documented_outputs("runs/EXPERIMENT/"), {"dense", "sparse"});
  expect_listed(experiment / "dense", documented_outputs("runs/EXPERIMENT/VARIANT/"), {});
}

}  // namespace
}  // namespace bertlab
