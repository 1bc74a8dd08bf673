#include "host/process_rank.h"

#include <bertlab/error.h>

#include <cstdlib>

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

}  // namespace

std::optional<ProcessRank> process_rank_from_env() {
  const char* rank_var = "RANK";
  const char* world_var = "WORLD_SIZE";
  const char* local_var = "LOCAL_RANK";
  if (!env("RANK") && env("SLURM_PROCID")) {
    rank_var = "SLURM_PROCID";
    world_var = "SLURM_NTASKS";
    local_var = "SLURM_LOCALID";
  }
  auto rank = env(rank_var);
  if (!rank) return std::nullopt;
  auto world = env(world_var);
  if (!world) {
    throw ConfigError(
        fmt::format("environment: {} is set but {} is not; start the ranks with "
                    "`bertlab launch --nproc N -- ...` or torchrun",
                    rank_var, world_var));
  }
  ProcessRank out;
  out.rank = env_int(rank_var, *rank, 0);
  out.world_size = env_int(world_var, *world, 1);
  if (out.rank >= out.world_size) {
    throw ConfigError(fmt::format("environment: {}={} is not below {}={}", rank_var, out.rank,
                                  world_var, out.world_size));
  }
  if (auto local = env(local_var)) out.local_rank = env_int(local_var, *local, 0);
  out.local_world_size = out.world_size;
  if (auto lws = env("LOCAL_WORLD_SIZE"))
    out.local_world_size = env_int("LOCAL_WORLD_SIZE", *lws, 1);
  if (auto addr = env("MASTER_ADDR")) out.master_addr = *addr;
  if (auto port = env("MASTER_PORT")) out.master_port = env_int("MASTER_PORT", *port, 1);
  return out;
}

bool is_secondary_process() {
  auto rank = process_rank_from_env();
  return rank && rank->rank != 0;
}

}  // namespace bertlab
