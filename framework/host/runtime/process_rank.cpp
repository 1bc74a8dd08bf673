// Reading this process's rank, world size and rendezvous address from torchrun's or Slurm's
// environment variables.

#include "runtime/process_rank.h"

#include <bertlab/error.h>

#include <cstdlib>

#include "runtime/slurm.h"

namespace bertlab {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, const std::string& text, int min) {
  try {
    size_t used = 0;
    int v = std::stoi(text, &used);
    if (used == text.size() && v >= min) return v;
  } catch (const std::exception&) {
  }
  throw ConfigError(fmt::format("environment {}={}: must be an integer >= {}", name, text, min));
}

/// The names of the launcher's variables: torchrun's, or Slurm's when only those are set.
struct RankVariables {
  const char* rank = "RANK";
  const char* world = "WORLD_SIZE";
  const char* local = "LOCAL_RANK";
  bool slurm = false;
};

RankVariables rank_variables() {
  RankVariables out;
  if (!env("RANK") && env("SLURM_PROCID")) {
    out = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", true};
  }
  return out;
}

/// The ranks on this node under Slurm: the entry of this node in the step's tasks per node.
int slurm_local_world_size(int fallback) {
  const auto per_node = env("SLURM_STEP_TASKS_PER_NODE") ? env("SLURM_STEP_TASKS_PER_NODE")
                                                         : env("SLURM_TASKS_PER_NODE");
  const auto node_id = env("SLURM_NODEID");
  if (!per_node || !node_id) return fallback;
  const int n = slurm_tasks_on_node(*per_node, env_int("SLURM_NODEID", *node_id, 0));
  return n > 0 ? n : fallback;
}

/// MASTER_ADDR, else (Slurm) the first host of the step's node list.
void find_master_addr(ProcessRank& out, bool slurm) {
  if (auto addr = env("MASTER_ADDR")) {
    out.master_addr = *addr;
    out.master_from = "MASTER_ADDR";
    return;
  }
  if (!slurm) return;
  // The step's list first: srun may run a step on some of the job's nodes, and rank 0 is on
  // the step's first node.
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (auto list = env(name)) {
      out.master_addr = first_slurm_host(*list);
      out.master_from = fmt::format("the first host of {}={}", name, *list);
      return;
    }
  }
  throw ConfigError(
      "environment: SLURM_PROCID is set but neither MASTER_ADDR nor SLURM_JOB_NODELIST is; set "
      "MASTER_ADDR to the host of rank 0");
}

/// MASTER_PORT, else (Slurm) a port derived from the job id, so jobs sharing a node differ.
void find_master_port(ProcessRank& out, bool slurm) {
  if (auto port = env("MASTER_PORT")) {
    out.master_port = env_int("MASTER_PORT", *port, 1);
    BERTLAB_CHECK_AS(ConfigError, out.master_port <= 65535,
                     "environment MASTER_PORT={}: must be a TCP port (1-65535)", *port);
    return;
  }
  if (!slurm) return;
  if (auto job = env("SLURM_JOB_ID")) {
    out.master_port = slurm_master_port(*job);
    out.master_from += fmt::format(", port 15000 + the last 4 digits of SLURM_JOB_ID={}", *job);
  }
}

}  // namespace

std::optional<ProcessRank> process_rank_from_env() {
  const RankVariables vars = rank_variables();
  auto rank = env(vars.rank);
  if (!rank) return std::nullopt;
  auto world = env(vars.world);
  if (!world && vars.slurm) world = env("SLURM_NPROCS");
  if (!world) {
    throw ConfigError(
        fmt::format("environment: {} is set but {} is not; start the ranks with "
                    "`bertlab launch --nproc N -- ...`, torchrun or srun",
                    vars.rank, vars.world));
  }
  ProcessRank out;
  out.rank = env_int(vars.rank, *rank, 0);
  out.world_size = env_int(vars.world, *world, 1);
  if (out.rank >= out.world_size) {
    throw ConfigError(fmt::format("environment: {}={} is not below {}={}", vars.rank, out.rank,
                                  vars.world, out.world_size));
  }
  if (auto local = env(vars.local)) out.local_rank = env_int(vars.local, *local, 0);
  out.local_world_size = out.world_size;
  if (auto lws = env("LOCAL_WORLD_SIZE")) {
    out.local_world_size = env_int("LOCAL_WORLD_SIZE", *lws, 1);
  } else if (vars.slurm) {
    out.local_world_size = slurm_local_world_size(out.world_size);
  }
  find_master_addr(out, vars.slurm);
  find_master_port(out, vars.slurm);
  if (env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True") {
    out.agent_store_prefix =
        "/worker/attempt_" + env("TORCHELASTIC_RESTART_COUNT").value_or(std::string("0"));
  }
  return out;
}

bool is_secondary_process() {
  // Only the rank is needed: no host list to expand.
  const RankVariables vars = rank_variables();
  const auto rank = env(vars.rank);
  return rank && env_int(vars.rank, *rank, 0) != 0;
}

}  // namespace bertlab
