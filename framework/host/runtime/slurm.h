#pragma once
// What a rank started by Slurm (srun, sbatch) needs to find rank 0 when MASTER_ADDR and
// MASTER_PORT are not set: the first host of the step's node list and a port of the job's own.

#include <string>
#include <vector>

namespace bertlab {

/// The host names of a Slurm host list, in order, as `scontrol show hostnames` prints them:
/// comma-separated entries, each a name with bracketed ranges (`node[01-04,07]`, zero padding
/// kept as the range's first number writes it), several bracket groups in one name expanding to
/// every combination (`rack[1-2]-n[1-2]`). Throws ConfigError naming the list and the problem.
std::vector<std::string> expand_slurm_hostlist(const std::string& list);

/// The first host of `list`: `scontrol show hostnames` when scontrol is on PATH and succeeds,
/// else expand_slurm_hostlist's.
std::string first_slurm_host(const std::string& list);

/// The rendezvous port of Slurm job `job_id` when MASTER_PORT is not set, as PyTorch Lightning
/// derives it: 15000 + the job id's last four digits (15000-24999), so that two jobs sharing a
/// node use different ports. Throws ConfigError when `job_id` is not a number.
int slurm_master_port(const std::string& job_id);

/// The tasks on node `node_id` of a Slurm tasks-per-node list ("2(x3),1": 2 on nodes 0-2, 1 on
/// node 3), as SLURM_STEP_TASKS_PER_NODE writes it; 0 when the list is malformed or too short.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id);

}  // namespace bertlab
