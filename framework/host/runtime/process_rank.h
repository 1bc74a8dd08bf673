#pragma once
// This process's place in a multi-process run: torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or Slurm's (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, the step's node list and job id) when RANK is not set.

#include <optional>
#include <string>

namespace bertlab {

struct ProcessRank {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// Where master_addr and master_port came from, for the log ("MASTER_ADDR", "the first host
  /// of SLURM_JOB_NODELIST=node[01-02]", ...).
  std::string master_from = "the default";
  /// torchrun 2.x's elastic agent serves the store at master_addr:master_port itself
  /// (TORCHELASTIC_USE_AGENT_STORE=True): every rank joins it as a client, its keys under this
  /// prefix ("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>", as torch.distributed's rendezvous).
  /// Empty: rank 0 serves the store.
  std::string agent_store_prefix;
};

/// The variables of this process, or nullopt when neither torchrun's nor Slurm's are set.
/// Under Slurm without MASTER_ADDR, rank 0's host is the first of SLURM_STEP_NODELIST (else
/// SLURM_JOB_NODELIST, SLURM_NODELIST); without MASTER_PORT the port derives from SLURM_JOB_ID
/// (slurm_master_port). Throws ConfigError naming the variable when one is malformed or missing.
std::optional<ProcessRank> process_rank_from_env();

/// True when this process is a rank other than 0 of a launched run: it computes, but writes
/// no files and prints no tables.
bool is_secondary_process();

}  // namespace bertlab
