// Every rank's checkpoint state, gathered to every rank as bytes and restored per rank.

#include "train/rank_state.h"

#include <ATen/ATen.h>
#include <bertlab/communicator.h>
#include <bertlab/error.h>
#include <bertlab/strategy.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace bertlab {

namespace {

/// `tensors` as one byte tensor: an 8-byte header length, a JSON header of names, dtypes and
/// shapes, then every tensor's bytes in order.
at::Tensor pack(const NamedTensors& tensors) {
  nlohmann::json header = nlohmann::json::array();
  std::vector<at::Tensor> parts;
  for (const auto& [name, t] : tensors) {
    const at::Tensor c = t.detach().to(at::kCPU).contiguous();
    header.push_back(
        {{"name", name}, {"dtype", static_cast<int>(c.scalar_type())}, {"shape", c.sizes().vec()}});
    parts.push_back(
        at::from_blob(c.data_ptr(), {static_cast<int64_t>(c.nbytes())}, at::kByte).clone());
  }
  const std::string text = header.dump();
  at::Tensor head = at::empty({static_cast<int64_t>(8 + text.size())}, at::kByte);
  const int64_t length = static_cast<int64_t>(text.size());
  std::memcpy(head.data_ptr(), &length, 8);
  std::memcpy(head.data_ptr<uint8_t>() + 8, text.data(), text.size());
  parts.insert(parts.begin(), head);
  return at::cat(parts);
}

NamedTensors unpack(const at::Tensor& bytes) {
  const auto* data = bytes.data_ptr<uint8_t>();
  int64_t length = 0;
  std::memcpy(&length, data, 8);
  const auto header = nlohmann::json::parse(std::string(data + 8, data + 8 + length));
  int64_t offset = 8 + length;
  NamedTensors out;
  for (const auto& item : header) {
    const auto dtype = static_cast<at::ScalarType>(item.at("dtype").get<int>());
    const auto shape = item.at("shape").get<std::vector<int64_t>>();
    at::Tensor t = at::empty(shape, dtype);
    std::memcpy(t.data_ptr(), data + offset, t.nbytes());
    offset += static_cast<int64_t>(t.nbytes());
    out.emplace_back(item.at("name").get<std::string>(), t);
  }
  return out;
}

}  // namespace

std::vector<NamedTensors> gather_rank_tensors(const NamedTensors& mine, Communicator& comm) {
  const at::Tensor bytes = pack(mine);
  if (comm.world_size() == 1) return {unpack(bytes)};
  const auto sizes = comm.all_gather(at::tensor({bytes.numel()}, at::kLong));
  int64_t largest = 0;
  for (const auto& s : sizes) largest = std::max(largest, s.item<int64_t>());
  const at::Tensor padded = at::cat({bytes, at::zeros({largest - bytes.numel()}, at::kByte)});
  std::vector<NamedTensors> out;
  for (const auto& b : comm.all_gather(padded)) out.push_back(unpack(b));
  return out;
}

NamedTensors gather_rank_state(const Strategy& strategy, const Optimizer& optimizer,
                               const std::vector<NamedTensor>& parameters, bool with_weights,
                               Communicator& comm) {
  NamedTensors mine;
  for (auto& [name, t] : strategy.state_dict()) mine.emplace_back("strategy/" + name, t);
  if (with_weights) {
    for (const auto& p : parameters) mine.emplace_back("model/" + p.name, p.tensor.detach());
    for (auto& [name, t] : optimizer.state_dict()) mine.emplace_back("optimizer/" + name, t);
  }
  NamedTensors all;
  const auto ranks = gather_rank_tensors(mine, comm);
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const auto& [name, t] : ranks[r]) all.emplace_back(fmt::format("rank{}/{}", r, name), t);
  }
  return all;
}

void restore_rank_state(const NamedTensors& saved, int rank, Strategy& strategy,
                        Optimizer& optimizer, const std::vector<NamedTensor>& parameters) {
  const std::string prefix = fmt::format("rank{}/", rank);
  NamedTensors strategy_state, optimizer_state;
  std::map<std::string, at::Tensor> weights;
  for (const auto& [name, t] : saved) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const auto slash = rest.find('/');
    const std::string part = rest.substr(0, slash), key = rest.substr(slash + 1);
    if (part == "strategy") strategy_state.emplace_back(key, t);
    if (part == "optimizer") optimizer_state.emplace_back(key, t);
    if (part == "model") weights[key] = t;
  }
  strategy.load_state_dict(strategy_state);
  if (weights.empty()) return;
  optimizer.load_state_dict(optimizer_state);
  at::NoGradGuard no_grad;
  for (const auto& p : parameters) {
    auto it = weights.find(p.name);
    BERTLAB_CHECK(it != weights.end(), "the checkpoint's ranks.safetensors lacks {}model/{}",
                  prefix, p.name);
    p.tensor.detach().copy_(it->second);
  }
}

}  // namespace bertlab
