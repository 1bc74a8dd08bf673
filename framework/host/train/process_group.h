#pragma once
// A launched rank's place in its run's group: the TCP store at MASTER_ADDR:MASTER_PORT, the check
// that every rank runs the same configuration, and the Gloo or NCCL communicator.

#include <bertlab/communicator.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "runtime/process_rank.h"
#include "train/run_options.h"

namespace bertlab {

/// Joins the group `group_name` (one per variant, on one store per process) as `process`'s rank:
/// NCCL between CUDA processes when the backend is "auto" or "nccl", Gloo otherwise (bound to an
/// address of this machine). Throws ConfigError listing every key whose value differs between
/// the ranks' `resolved_toml`, and CommError when a rank does not arrive within the timeout.
std::unique_ptr<Communicator> join_process_group(const ProcessRank& process,
                                                 const RunOptions& options, c10::Device device,
                                                 const std::string& resolved_toml,
                                                 const std::string& group_name);

}  // namespace bertlab
