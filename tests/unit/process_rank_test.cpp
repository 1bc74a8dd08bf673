// The rank variables of launched processes: Slurm's host lists and ports, the address Gloo binds,
// and how a rank that cannot reach rank 0 fails.
#include <gtest/gtest.h>
#include <stdlib.h>  // setenv, unsetenv

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <c10/util/Exception.h>

#include "bertlab/error.h"
#include "comm/gloo_binding.h"
#include "runtime/process_rank.h"
#include "runtime/slurm.h"
#include "test_util.h"

namespace bertlab {
namespace {

using testing::data_path;
using testing::run_bertlab;
using Hosts = std::vector<std::string>;

TEST(SlurmHostList, ExpandsTheFormsSlurmDocuments) {
  EXPECT_EQ(expand_slurm_hostlist("node01"), Hosts({"node01"}));
  EXPECT_EQ(expand_slurm_hostlist("node[01-04,07]"),
            Hosts({"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(expand_slurm_hostlist("node[1-3],login2"),
            Hosts({"node1", "node2", "node3", "login2"}));
  EXPECT_EQ(expand_slurm_hostlist("gpu[8-11]"), Hosts({"gpu8", "gpu9", "gpu10", "gpu11"}));
  EXPECT_EQ(expand_slurm_hostlist("tux[098-101]"), Hosts({"tux098", "tux099", "tux100", "tux101"}));
  // Several ranges and prefixes, a suffix after the bracket, two bracket groups.
  EXPECT_EQ(expand_slurm_hostlist("a[1-2],b[10,12],c-ib"),
            Hosts({"a1", "a2", "b10", "b12", "c-ib"}));
  EXPECT_EQ(expand_slurm_hostlist("n[1-2]-ib"), Hosts({"n1-ib", "n2-ib"}));
  EXPECT_EQ(expand_slurm_hostlist("rack[1-2]-n[01-02]"),
            Hosts({"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
  EXPECT_EQ(expand_slurm_hostlist("cn.example.org"), Hosts({"cn.example.org"}));
}

TEST(SlurmHostList, MalformedListsNameTheProblem) {
  for (const char* bad : {"node[01-04", "node]1[", "node[a-b]", "node[4-1]", "node[]", ","}) {
    try {
      expand_slurm_hostlist(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

/// `scontrol show hostnames LIST`, when this machine has scontrol; "" otherwise.
std::string scontrol_hostnames(const std::string& list) {
  const std::string command = "scontrol show hostnames '" + list + "' 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), pipe.get()) != nullptr) out += buffer;
  return pclose(pipe.release()) == 0 ? out : "";
}

TEST(SlurmHostList, AgreesWithScontrol) {
  // scontrol reads a slurm.conf before it expands anything; off a cluster, give it a minimal one.
  testing::TempDir dir;
  const bool own_conf = std::getenv("SLURM_CONF") == nullptr;
  if (own_conf) {
    std::ofstream(dir / "slurm.conf") << "ClusterName=expand\nSlurmctldHost=localhost\n"
                                         "NodeName=localhost CPUs=1 State=UNKNOWN\n"
                                         "PartitionName=p Nodes=localhost Default=YES\n";
    setenv("SLURM_CONF", (dir / "slurm.conf").c_str(), 1);
  }
  int compared = 0;
  for (const char* list : {"node[01-04,07]", "node[1-3],login2", "gpu[8-11]", "tux[098-101]",
                           "a[1-2],b[10,12],c-ib", "n[1-2]-ib", "rack[1-2]-n[01-02]"}) {
    const std::string reference = scontrol_hostnames(list);
    if (reference.empty()) continue;
    std::string ours;
    for (const auto& host : expand_slurm_hostlist(list)) ours += host + "\n";
    EXPECT_EQ(ours, reference) << list;
    EXPECT_EQ(first_slurm_host(list), expand_slurm_hostlist(list).front()) << list;
    ++compared;
  }
  if (own_conf) unsetenv("SLURM_CONF");
  if (compared == 0)
    GTEST_SKIP() << "scontrol is not installed (scripts/setup-deps.sh installs it)";
}

TEST(SlurmPort, DerivedFromTheJobIdAsLightning) {
  EXPECT_EQ(slurm_master_port("7"), 15007);
  EXPECT_EQ(slurm_master_port("1234"), 16234);
  EXPECT_EQ(slurm_master_port("987654321"), 19321);  // the last four digits
  EXPECT_EQ(slurm_master_port("10000"), 15000);
  // Two jobs sharing a node get different ports.
  EXPECT_NE(slurm_master_port("4711"), slurm_master_port("4712"));
  EXPECT_THROW(slurm_master_port("12_3"), ConfigError);
}

TEST(SlurmTasksPerNode, ReadsTheRepeatForm) {
  EXPECT_EQ(slurm_tasks_on_node("2", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), 0);
  EXPECT_EQ(slurm_tasks_on_node("x", 0), 0);
}

using EnvVars = std::vector<std::pair<std::string, std::string>>;

/// Sets the variables for the scope of one test and restores an empty environment after.
class ScopedEnv {
 public:
  ScopedEnv() : ScopedEnv(std::vector<std::pair<std::string, std::string>>{}) {}
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars)
      : vars_(std::move(vars)) {
    for (const char* name : kAll) unsetenv(name);
    for (const auto& [k, v] : vars_) setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const char* name : kAll) unsetenv(name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  static constexpr const char* kAll[] = {"RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_RANK",
                                         "LOCAL_WORLD_SIZE",
                                         "MASTER_ADDR",
                                         "MASTER_PORT",
                                         "SLURM_PROCID",
                                         "SLURM_NTASKS",
                                         "SLURM_LOCALID",
                                         "SLURM_JOB_NODELIST",
                                         "SLURM_STEP_NODELIST",
                                         "SLURM_NODELIST",
                                         "SLURM_JOB_ID",
                                         "SLURM_NODEID",
                                         "SLURM_STEP_TASKS_PER_NODE",
                                         "SLURM_TASKS_PER_NODE",
                                         "GLOO_SOCKET_IFNAME",
                                         "BERTLAB_DEBUG"};
  std::vector<std::pair<std::string, std::string>> vars_;
};

TEST(ProcessRank, UnderSlurmRankZeroIsTheFirstHostOfTheStepAndThePortIsTheJobs) {
  ScopedEnv env({{"SLURM_PROCID", "3"},
                 {"SLURM_NTASKS", "4"},
                 {"SLURM_LOCALID", "1"},
                 {"SLURM_NODEID", "1"},
                 {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                 {"SLURM_JOB_NODELIST", "cn[07-09]"},
                 {"SLURM_STEP_NODELIST", "cn[08-09]"},
                 {"SLURM_JOB_ID", "424242"}});
  auto rank = process_rank_from_env();
  ASSERT_TRUE(rank);
  EXPECT_EQ(rank->rank, 3);
  EXPECT_EQ(rank->world_size, 4);
  EXPECT_EQ(rank->local_rank, 1);
  EXPECT_EQ(rank->local_world_size, 2);
  EXPECT_EQ(rank->master_addr, "cn08");
  EXPECT_EQ(rank->master_port, 19242);
  EXPECT_NE(rank->master_from.find("SLURM_STEP_NODELIST=cn[08-09]"), std::string::npos)
      << rank->master_from;
}

TEST(ProcessRank, TorchrunsVariablesWinOverSlurms) {
  ScopedEnv env({{"RANK", "1"},
                 {"WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "198.18.0.1"},
                 {"MASTER_PORT", "29400"},
                 {"SLURM_PROCID", "0"},
                 {"SLURM_NTASKS", "1"},
                 {"SLURM_JOB_NODELIST", "cn01"},
                 {"SLURM_JOB_ID", "5"}});
  auto rank = process_rank_from_env();
  ASSERT_TRUE(rank);
  EXPECT_EQ(rank->rank, 1);
  EXPECT_EQ(rank->master_addr, "198.18.0.1");
  EXPECT_EQ(rank->master_port, 29400);
}

TEST(ProcessRank, SlurmWithoutANodeListAsksForMasterAddr) {
  ScopedEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  try {
    process_rank_from_env();
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("set MASTER_ADDR"), std::string::npos) << e.what();
  }
}

TEST(ProcessRank, NoLauncherVariablesIsNoProcessRank) {
  ScopedEnv env;
  EXPECT_FALSE(process_rank_from_env());
}

TEST(GlooBinding, RanksOnThisMachineBindLoopback) {
  ScopedEnv env;
  const GlooBinding binding = choose_gloo_binding("127.0.0.1");
  EXPECT_EQ(binding.address, "127.0.0.1");
  EXPECT_EQ(binding.interface, "lo");
  EXPECT_NE(binding.describe().find("the route to MASTER_ADDR 127.0.0.1"), std::string::npos);
}

TEST(GlooBinding, AnInterfaceThatDoesNotExistIsAConfigError) {
  ScopedEnv env(EnvVars{{"GLOO_SOCKET_IFNAME", "lo,nosuch0"}});
  try {
    choose_gloo_binding("127.0.0.1");
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no interface 'nosuch0' (it has lo"), std::string::npos)
        << e.what();
  }
}

TEST(GlooBinding, GlooSocketIfnameIsUsedAsGiven) {
  ScopedEnv env(EnvVars{{"GLOO_SOCKET_IFNAME", "lo"}});
  const GlooBinding binding = choose_gloo_binding("198.18.0.1");
  EXPECT_EQ(binding.interfaces, Hosts({"lo"}));
  EXPECT_EQ(binding.describe(), "interface lo (GLOO_SOCKET_IFNAME)");
}

// A rank whose master does not answer (nothing listens on the port): it fails within its
// timeout, naming the address and port and what to check; libtorch's C++ stack trace is in
// the message only with BERTLAB_DEBUG=1.
TEST(ProcessRank, ARankThatCannotReachTheMasterSaysWhatToCheckWithoutAStackTrace) {
  testing::TempDir dir;
  const std::vector<std::string> args = {
      "run",          data_path("experiments/launch.toml").string(),
      "--variant",    "mirrored-env-2",
      "--output-dir", dir.path().string(),
      "--set",        "strategy.timeout_s=3"};
  const std::vector<std::string> env = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
                                        "MASTER_PORT=9"};
  const auto start = std::chrono::steady_clock::now();
  auto r = run_bertlab(args, "", env);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("[comm] rank 1 of 2: the rendezvous at 127.0.0.1:9 failed within 3 s"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("this machine reaches 127.0.0.1 on TCP port 9 (firewall"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("frame #"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Exception raised from"), std::string::npos) << r.err;
  EXPECT_LT(waited, 3.0 + 10.0);

  std::vector<std::string> debug_env = env;
  debug_env.emplace_back("BERTLAB_DEBUG=1");
  auto debug = run_bertlab(args, "", debug_env);
  EXPECT_EQ(debug.exit_code, 1) << debug.err;
  EXPECT_NE(debug.err.find("the rendezvous at 127.0.0.1:9 failed within 3 s"), std::string::npos)
      << debug.err;
}

// libtorch's own errors (c10::Error, as TORCH_CHECK throws them in 1.13 and 2.x) carry the C++
// stack trace in what(); users see the message alone, BERTLAB_DEBUG=1 keeps the trace.
TEST(ErrorText, DropsLibtorchsStackTraceUnlessDebugging) {
  std::string raw;
  try {
    TORCH_CHECK(false, "sizes do not match: ", 2, " vs ", 3);
  } catch (const c10::Error& e) {
    raw = e.what();
  }
  ASSERT_NE(raw.find("sizes do not match: 2 vs 3"), std::string::npos) << raw;
  ASSERT_NE(raw.find("Exception raised from"), std::string::npos) << raw;
  ScopedEnv env;
  const std::string shown = error_text(c10::Error(raw, ""));
  EXPECT_NE(shown.find("sizes do not match: 2 vs 3"), std::string::npos) << shown;
  EXPECT_EQ(without_stack_trace(raw).find("Exception raised from"), std::string::npos);
  EXPECT_EQ(without_stack_trace(raw).find("frame #"), std::string::npos);
  setenv("BERTLAB_DEBUG", "1", 1);
  EXPECT_EQ(without_stack_trace(raw), raw);
  unsetenv("BERTLAB_DEBUG");
  EXPECT_EQ(without_stack_trace("first line\n  frame #0: f()\nlast line"), "first line\nlast line");
}

}  // namespace
}  // namespace bertlab
