// Plugin loading through the real `bertlab` executable: the in-tree plugins, an out-of-tree one
// from --plugin-dir and BERTLAB_PLUGIN_PATH, and one deliberately broken plugin per failure.

#include <bertlab/api_version.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::run_bertlab;

std::string case_dir(const std::string& name) {
  return (fs::path(BERTLAB_TEST_PLUGIN_DIR) / name).string();
}

std::string case_file(const std::string& name) {
  return (fs::path(BERTLAB_TEST_PLUGIN_DIR) / name / ("libbertlab_test_" + name + ".so")).string();
}

TEST(PluginLoader, ListsTheThreeInTreePluginsFromSeparateLibraries) {
  auto r = run_bertlab({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = fs::path(BERTLAB_BUILD_DIR) / "lib" / "bertlab" / "plugins";
  for (const auto& [kind, name] : std::vector<std::pair<std::string, std::string>>{
           {"task", "classifier"}, {"strategy", "single"}, {"optimizer", "adam_weight_decay"}}) {
    const std::string file = (dir / ("libbertlab_" + name + ".so")).string();
    ASSERT_TRUE(fs::exists(file)) << file;
    bool found = false;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(kind, 0) == 0 && line.find(" " + name + " ") != std::string::npos &&
          line.find(file) != std::string::npos) {
        found = true;
      }
    }
    EXPECT_TRUE(found) << kind << " " << name << " from " << file << " in:\n" << r.out;
  }
}

TEST(PluginLoader, DescribeShowsTheOptionsTable) {
  auto r = run_bertlab({"plugins", "--describe", "adam_weight_decay"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* key : {"learning_rate", "warmup_proportion", "weight_decay_rate", "clip_norm",
                          "beta_1", "epsilon"}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key << "\n" << r.out;
  }
  auto c = run_bertlab({"plugins", "--describe", "classifier"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("task_name"), std::string::npos) << c.out;
  EXPECT_NE(
      c.out.find("cola|sst2|sst-2|mrpc|stsb|sts-b|qqp|mnli|qnli|rte|wnli|xnli|trec|tsv|jsonl"),
      std::string::npos)
      << c.out;
  auto s = run_bertlab({"plugins", "--describe", "single"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("replicas"), std::string::npos) << s.out;

  auto missing = run_bertlab({"plugins", "--describe", "clasifier"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("did you mean 'classifier'?"), std::string::npos) << missing.err;
}

TEST(PluginLoader, LoadsAnOutOfTreePluginFromPluginDirAndEnvironment) {
  auto r = run_bertlab({"plugins", "--plugin-dir", case_dir("good")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("test_identity"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1.2.3"), std::string::npos) << r.out;

  auto env = run_bertlab({"plugins", "--describe", "test_identity"}, "",
                         {"BERTLAB_PLUGIN_PATH=/nonexistent-first:" + case_dir("good")});
  // A folder on the path that does not exist is reported, so a typo in the path is not silent.
  EXPECT_EQ(env.exit_code, 2) << env.err;
  EXPECT_NE(env.err.find("/nonexistent-first: plugin folder does not exist"), std::string::npos)
      << env.err;
  auto env_ok = run_bertlab({"plugins", "--describe", "test_identity"}, "",
                            {"BERTLAB_PLUGIN_PATH=" + case_dir("good")});
  ASSERT_EQ(env_ok.exit_code, 0) << env_ok.err;
  EXPECT_NE(env_ok.out.find("answer"), std::string::npos) << env_ok.out;
  EXPECT_NE(env_ok.out.find("in [0, 100]"), std::string::npos) << env_ok.out;

  auto tool = run_bertlab({"testtool", "echo", "a", "b", "--plugin-dir", case_dir("good")});
  ASSERT_EQ(tool.exit_code, 0) << tool.err;
  EXPECT_EQ(tool.out, "a\nb\n");
}

// The host's flags anywhere before `--`, one value each; everything else goes to the tool in order.
TEST(PluginLoader, ToolsTakeTheHostFlagsAnywhereAndKeepTheirArguments) {
  auto before = run_bertlab({"testtool", "--plugin-dir", case_dir("good"), "echo", "a", "b"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_EQ(before.out, "a\nb\n");
  auto flags = run_bertlab(
      {"testtool", "echo", "--x=1", "--plugin-dir", case_dir("good"), "-n", "--", "--plugin-dir"});
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  EXPECT_EQ(flags.out, "--x=1\n-n\n--\n--plugin-dir\n");
  auto missing = run_bertlab({"testtool", "echo", "--plugin-dir"});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("bertlab testtool: --plugin-dir"), std::string::npos) << missing.err;
}

struct BrokenCase {
  const char* name;
  const char* message;  // expected after "<file>: "
};

class BrokenPlugin : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenPlugin, IsRefusedWithItsOwnMessageAndExitCode2) {
  const BrokenCase& c = GetParam();
  auto r = run_bertlab({"plugins", "--plugin-dir", case_dir(c.name)});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  const std::string expected = case_file(c.name) + ": " + c.message;
  EXPECT_NE(r.err.find(expected), std::string::npos)
      << "expected: " << expected << "\ngot: " << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BrokenPlugin,
    ::testing::Values(BrokenCase{"no_entry",
                                 "not a bertlab plugin: it has no 'bertlab_plugin_entry' entry "
                                 "point"},
                      BrokenCase{"api_version",
                                 "plugin API version mismatch: got 42, supported version is "},
                      BrokenCase{"abi_tag",
                                 "plugin ABI tag mismatch: got 'gcc-4/cxx11abi-0/torch-0.4', "
                                 "expected '"},
                      BrokenCase{"register_throws",
                                 "plugin 'register_throws' failed to register its "
                                 "components: the license server is unreachable"},
                      BrokenCase{"duplicate", "strategy 'single' is registered twice: by "}),
    [](const ::testing::TestParamInfo<BrokenCase>& info) { return std::string(info.param.name); });

// Both refused plugins are built by the real BERTLAB_PLUGIN macro with a foreign
// BERTLAB_API_VERSION or BERTLAB_ABI_TAG (tests/plugins/CMakeLists.txt); the message shows the
// plugin's value and the host's, which is this SDK's (the test is compiled as the host is).
TEST(PluginLoader, AForeignApiVersionOrAbiTagIsRefusedShowingBoth) {
  auto api = run_bertlab({"plugins", "--plugin-dir", case_dir("api_version")});
  EXPECT_EQ(api.exit_code, 2) << api.out << api.err;
  EXPECT_NE(api.err.find(fmt::format("{}: plugin API version mismatch: got 42, supported version "
                                     "is {}; rebuild the plugin",
                                     case_file("api_version"), BERTLAB_SDK_API_VERSION)),
            std::string::npos)
      << api.err;

  auto abi = run_bertlab({"plugins", "--plugin-dir", case_dir("abi_tag")});
  EXPECT_EQ(abi.exit_code, 2) << abi.out << abi.err;
  EXPECT_NE(abi.err.find(fmt::format(
                "{}: plugin ABI tag mismatch: got 'gcc-4/cxx11abi-0/torch-0.4', expected '{}'",
                case_file("abi_tag"), BERTLAB_SDK_ABI_TAG)),
            std::string::npos)
      << abi.err;
}

TEST(PluginLoader, DuplicateNamesBothFiles) {
  auto r = run_bertlab({"plugins", "--plugin-dir", case_dir("duplicate")});
  EXPECT_EQ(r.exit_code, 2);
  const std::string builtin =
      (fs::path(BERTLAB_BUILD_DIR) / "lib" / "bertlab" / "plugins" / "libbertlab_single.so")
          .string();
  EXPECT_NE(r.err.find(builtin), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(case_file("duplicate") + " (plugin 'duplicate')"), std::string::npos)
      << r.err;
}

TEST(PluginLoader, AFileThatIsNotASharedLibraryGivesTheLoadersReason) {
  testing::TempDir dir;
  testing::write_file(dir / "libbertlab_fake.so", std::string(200, '#') + "\nnot an ELF file\n");
  auto r = run_bertlab({"plugins", "--plugin-dir", dir.path().string()});
  EXPECT_EQ(r.exit_code, 2);
  const std::string expected =
      (dir / "libbertlab_fake.so").string() + ": cannot be loaded as a shared library: ";
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  // The dynamic loader's own reason follows.
  EXPECT_NE(r.err.find("invalid ELF header"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

// A plugin file, or a plugin folder, that every user may write could hold anyone's code: it is
// refused unless --allow-insecure-plugins.
TEST(PluginLoader, AWorldWritablePluginOrFolderIsRefused) {
  namespace fs = std::filesystem;
  for (const bool folder : {false, true}) {
    SCOPED_TRACE(folder ? "folder" : "file");
    testing::TempDir dir;
    const fs::path plugins = dir / "plugins";
    fs::create_directories(plugins);
    for (const auto& entry : fs::directory_iterator(case_dir("good"))) {
      if (entry.path().extension() == ".so") {
        fs::copy_file(entry.path(), plugins / entry.path().filename());
      }
    }
    for (const auto& entry : fs::directory_iterator(plugins)) {
      fs::permissions(folder ? plugins : entry.path(), fs::perms::others_write,
                      fs::perm_options::add);
    }
    auto refused = run_bertlab({"plugins", "--plugin-dir", plugins.string()});
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find("is writable by every user"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("chmod o-w"), std::string::npos) << refused.err;
    auto allowed =
        run_bertlab({"plugins", "--plugin-dir", plugins.string(), "--allow-insecure-plugins"});
    EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
    EXPECT_NE(allowed.out.find("test_identity"), std::string::npos) << allowed.out;
  }
}

}  // namespace
}  // namespace bertlab
