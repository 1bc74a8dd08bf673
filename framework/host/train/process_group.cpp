// Joining a launched run's group: the store, the configuration check, the communicator.

#include "train/process_group.h"

#include <bertlab/error.h>
#include <bertlab/log.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <vector>

#include "comm/gloo_communicator.h"
#include "comm/nccl_communicator.h"
#include "config/experiment.h"
#include "train/train_checkpoint.h"

namespace bertlab {

namespace {

/// Refuses to train when the ranks' resolved configurations differ (a rank started with other
/// --set values, another experiment file, other data): every rank publishes its resolved.toml
/// and compares it with every other's; the error lists each key that differs, by rank.
void check_same_configuration(const RendezvousStore& store, const ProcessRank& process,
                              const std::string& resolved_toml, std::chrono::milliseconds timeout) {
  const auto all =
      exchange_text(store, "config", resolved_toml, process.rank, process.world_size, timeout);
  std::vector<std::map<std::string, std::string>> settings;
  settings.reserve(static_cast<size_t>(process.world_size));
  for (int r = 0; r < process.world_size; ++r) {
    settings.push_back(flatten_resolved_toml(all[r], fmt::format("rank {}'s configuration", r)));
  }
  std::set<std::string> keys;
  for (const auto& one : settings) {
    for (const auto& [k, v] : one) keys.insert(k);
  }
  std::vector<std::string> differences;
  for (const auto& key : keys) {
    std::vector<std::string> values;
    for (const auto& one : settings) {
      auto it = one.find(key);
      values.push_back(it == one.end() ? "(unset)" : it->second);
    }
    if (std::all_of(values.begin(), values.end(), [&](const auto& v) { return v == values[0]; })) {
      continue;
    }
    std::vector<std::string> by_rank;
    for (size_t r = 0; r < values.size(); ++r)
      by_rank.push_back(fmt::format("rank {}: {}", r, values[r]));
    differences.push_back(
        fmt::format("{} differs between the ranks ({})", key, fmt::join(by_rank, ", ")));
  }
  if (differences.empty()) return;
  differences.push_back(fmt::format(
      "[comm] rank {} of {}: every rank must run the same configuration; start them all with the "
      "same experiment file and --set arguments",
      process.rank, process.world_size));
  throw ConfigError(differences);
}

}  // namespace

std::unique_ptr<Communicator> join_process_group(const ProcessRank& process,
                                                 const RunOptions& options, c10::Device device,
                                                 const std::string& resolved_toml,
                                                 const std::string& group_name) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000.0));
  static std::shared_ptr<RendezvousStore> base;
  if (!base) {
    base = RendezvousStore::tcp(process.master_addr, process.master_port, process.rank,
                                process.world_size, timeout, process.agent_store_prefix);
  }
  auto store = RendezvousStore::prefixed(*base, group_name);
  // backend "auto": NCCL between CUDA processes (one device each), Gloo otherwise. NCCL picks
  // its own interface (NCCL_SOCKET_IFNAME).
  const std::string backend = options.backend;
  const bool nccl = backend == "nccl" || (backend == "auto" && device.is_cuda());
  const GlooBinding binding = nccl ? GlooBinding{} : choose_gloo_binding(process.master_addr);
  log_info("comm", "rank {} of {}: {} over TCP store {}:{} ({}{}), device {}{}", process.rank,
           process.world_size, nccl ? "NCCL" : "Gloo", process.master_addr, process.master_port,
           process.master_from,
           process.agent_store_prefix.empty() ? "" : ", served by torchrun's agent", device.str(),
           nccl ? "" : fmt::format(", Gloo bound to {}", binding.describe()));
  // Through the store first: a rank that never arrives is named here, before the group's
  // connections would only say that they timed out.
  check_same_configuration(*store, process, resolved_toml, timeout);
  auto comm = nccl ? make_nccl_communicator(*store, process.rank, process.world_size, timeout,
                                            device.index())
                   : make_gloo_communicator(*store, process.rank, process.world_size, timeout,
                                            binding, device);
  return comm;
}

}  // namespace bertlab
