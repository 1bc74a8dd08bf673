#pragma once
// The command-line tools of the pretrain plugin. Each returns the process exit code.

#include <string>
#include <vector>

namespace bertlab::pretrain {

/// `bertlab pretrain create-data`: create_pretraining_data.py's flags and output.
int create_data_tool(const std::vector<std::string>& args);
/// `bertlab bench create-data`: instances per second of the same work (no output written).
int bench_create_data_tool(const std::vector<std::string>& args);

}  // namespace bertlab::pretrain
