// Saving and restoring resumable training state (parameters, optimizer state, step, RNG state,
// metrics so far).

#include "train/train_checkpoint.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/io/atomic_file.h>
#include <bertlab/optimizer.h>
#include <torch/nn/module.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStepPrefix = "step-";

/// Keys whose change between the checkpoint and now makes the resumed run a different run.
const std::set<std::string>& resume_critical_keys() {
  static const std::set<std::string> keys = {
      "experiment.seed",
      "model.vocab_size",
      "model.hidden_size",
      "model.num_hidden_layers",
      "model.num_attention_heads",
      "model.intermediate_size",
      "model.max_position_embeddings",
      "model.type_vocab_size",
      "train.train_batch_size",
      "strategy.replicas",
      "task.plugin",
      "optimizer.plugin",
  };
  return keys;
}

/// Keys that may change freely between runs of the same training.
const std::set<std::string>& resume_free_keys() {
  static const std::set<std::string> keys = {
      "train.resume",
      "train.keep_checkpoint_max",
      "train.save_checkpoints_steps",
      "experiment.threads",
      "experiment.output_dir",
      "experiment.description",
      "model.init_checkpoint",
      "model.init_checkpoint_exclude",
      "strategy.timeout_s",
      "strategy.check_every_steps",
  };
  return keys;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  BERTLAB_CHECK_AS(DataError, in.good(), "{}: missing; the checkpoint is incomplete",
                   path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string to_hex(const at::Tensor& bytes) {
  const at::Tensor t = bytes.contiguous();
  const auto* p = t.data_ptr<uint8_t>();
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(static_cast<size_t>(t.numel()) * 2);
  for (int64_t i = 0; i < t.numel(); ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

at::Tensor from_hex(const std::string& hex, const fs::path& file) {
  BERTLAB_CHECK_AS(DataError, hex.size() % 2 == 0, "{}: rng_state is not hex", file.string());
  at::Tensor t = at::empty({static_cast<int64_t>(hex.size() / 2)}, at::kByte);
  auto* p = t.data_ptr<uint8_t>();
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw DataError(fmt::format("{}: rng_state is not hex", file.string()));
  };
  for (size_t i = 0; i < hex.size() / 2; ++i) {
    p[i] = static_cast<uint8_t>(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  }
  return t;
}

}  // namespace

std::map<std::string, std::string> flatten_resolved_toml(const std::string& toml_text,
                                                         const std::string& what) {
  std::map<std::string, std::string> out;
  toml::table table;
  try {
    table = toml::parse(toml_text, what);
  } catch (const toml::parse_error& e) {
    throw DataError(fmt::format("{}: not valid TOML: {}", what, e.description()));
  }
  for (const auto& [section, node] : table) {
    const toml::table* keys = node.as_table();
    if (keys == nullptr) continue;
    for (const auto& [key, value] : *keys) {
      std::string text;
      if (auto d = value.value_exact<double>()) {
        text = fmt::format("{}", *d);  // shortest form: 0.1, not 0.10000000000000001
      } else {
        std::ostringstream s;
        value.visit([&](const auto& v) { s << v; });
        text = s.str();
      }
      out[std::string(section.str()) + "." + std::string(key.str())] = text;
    }
  }
  return out;
}

fs::path train_checkpoint_dir(const fs::path& root, int64_t step) {
  return root / fmt::format("{}{:06}", kStepPrefix, step);
}

namespace {

/// The files of one checkpoint, written into the (temporary) folder `dir`.
void write_checkpoint_files(const fs::path& dir, const TrainState& state,
                            const torch::nn::Module& model, const NamedTensors& optimizer_state,
                            const std::string& resolved_toml) {
  NamedTensors params;
  for (const auto& item : model.named_parameters(true)) {
    params.emplace_back(item.key(), item.value().detach());
  }
  write_safetensors(dir / "model.safetensors", params,
                    {{"format", "pt"}, {"global_step", std::to_string(state.step)}});
  write_safetensors(dir / "optimizer.safetensors", optimizer_state,
                    {{"global_step", std::to_string(state.step)}});
  if (!state.rank_state.empty()) {
    write_safetensors(dir / "ranks.safetensors", state.rank_state,
                      {{"global_step", std::to_string(state.step)}});
  }
  nlohmann::ordered_json j;
  j["step"] = state.step;
  j["window_loss"] = state.window_loss;
  j["window_steps"] = state.window_steps;
  j["window_all"] = state.window_all;
  j["window_dense_bytes"] = state.window_dense_bytes;
  j["window_sparse_bytes"] = state.window_sparse_bytes;
  j["skipped_steps"] = state.skipped_steps;
  j["loss_scale"] = state.loss_scale;
  j["loss_scale_growth_tracker"] = state.loss_scale_growth_tracker;
  j["final_loss"] = state.final_loss;
  j["train_seconds"] = state.train_seconds;
  j["rng_state"] = state.rng_state.defined() ? to_hex(state.rng_state) : "";
  j["data_position"] = state.data_position;
  write_file_atomic(dir / "metrics.jsonl", state.metrics_lines);
  write_file_atomic(dir / "resolved.toml", resolved_toml);
  // state.json last: a folder with it is complete.
  write_file_atomic(dir / "state.json", j.dump(2) + "\n");
}

/// Deletes a checkpoint folder so that no moment of the deletion leaves a folder that looks
/// whole: it is renamed out of the listing first (one atomic step), then removed.
void remove_checkpoint(const fs::path& dir) {
  const fs::path doomed = dir.parent_path() / (".tmp-delete-" + dir.filename().string());
  fs::remove_all(doomed);
  fs::rename(dir, doomed);
  sync_directory(dir.parent_path());
  fs::remove_all(doomed);
}

}  // namespace

void save_train_checkpoint(const fs::path& root, const TrainState& state,
                           const torch::nn::Module& model, const NamedTensors& optimizer_state,
                           const std::string& resolved_toml, int64_t keep_max) {
  const fs::path final_dir = train_checkpoint_dir(root, state.step);
  const fs::path tmp = root / fmt::format(".tmp-{}{:06}.{}", kStepPrefix, state.step, ::getpid());
  try {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    write_checkpoint_files(tmp, state, model, optimizer_state, resolved_toml);
    sync_directory(tmp);
    if (fs::exists(final_dir)) remove_checkpoint(final_dir);
    fs::rename(tmp, final_dir);
    sync_directory(root);
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    const auto earlier = list_train_checkpoints(root);
    throw Error(fmt::format(
        "cannot write the checkpoint of step {}: {}. {}; free disk space (or raise the file-size "
        "limit) and run the same command with --resume",
        state.step, e.what(),
        earlier.empty()
            ? std::string("No earlier checkpoint exists")
            : fmt::format("The earlier checkpoint {} is intact", earlier.back().string())));
  }
  if (keep_max > 0) {
    auto all = list_train_checkpoints(root);
    for (size_t i = 0; i + static_cast<size_t>(keep_max) < all.size(); ++i) {
      remove_checkpoint(all[i]);
    }
  }
}

std::vector<fs::path> list_train_checkpoints(const fs::path& root) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kStepPrefix, 0) != 0 || !fs::is_regular_file(entry.path() / "state.json")) {
      continue;
    }
    try {
      found.emplace_back(std::stoll(name.substr(std::string(kStepPrefix).size())), entry.path());
    } catch (const std::exception&) {
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

TrainCheckpoint load_train_checkpoint(const fs::path& dir) {
  TrainCheckpoint ckpt;
  ckpt.dir = dir;
  const fs::path state_file = dir / "state.json";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(state_file));
    ckpt.state.step = j.at("step").get<int64_t>();
    ckpt.state.window_loss = j.at("window_loss").get<double>();
    ckpt.state.window_steps = j.at("window_steps").get<int64_t>();
    // Absent from checkpoints written before 2026-12-06: the window's steps without skips.
    ckpt.state.window_all = j.value("window_all", ckpt.state.window_steps);
    ckpt.state.window_dense_bytes = j.value("window_dense_bytes", int64_t{0});
    ckpt.state.window_sparse_bytes = j.value("window_sparse_bytes", int64_t{0});
    ckpt.state.skipped_steps = j.value("skipped_steps", int64_t{0});
    ckpt.state.loss_scale = j.value("loss_scale", 1.0);
    ckpt.state.loss_scale_growth_tracker = j.value("loss_scale_growth_tracker", int64_t{0});
    ckpt.state.final_loss = j.at("final_loss").get<double>();
    ckpt.state.train_seconds = j.at("train_seconds").get<double>();
    const std::string rng = j.at("rng_state").get<std::string>();
    if (!rng.empty()) ckpt.state.rng_state = from_hex(rng, state_file);
    ckpt.state.data_position = j.value("data_position", std::string());
  } catch (const nlohmann::json::exception& e) {
    throw DataError(
        fmt::format("{}: not a bertlab checkpoint state: {}", state_file.string(), e.what()));
  }
  ckpt.state.metrics_lines = read_text(dir / "metrics.jsonl");
  ckpt.resolved_toml = read_text(dir / "resolved.toml");
  ckpt.model = read_safetensors(dir / "model.safetensors");
  ckpt.optimizer = read_safetensors(dir / "optimizer.safetensors");
  if (fs::exists(dir / "ranks.safetensors")) {
    ckpt.state.rank_state = read_safetensors(dir / "ranks.safetensors");
  }
  return ckpt;
}

std::vector<std::string> compare_resume_config(const std::string& saved_toml,
                                               const std::string& current_toml,
                                               const fs::path& dir) {
  const auto saved = flatten_resolved_toml(saved_toml, (dir / "resolved.toml").string());
  const auto now = flatten_resolved_toml(current_toml, "the current configuration");
  std::set<std::string> keys;
  for (const auto& [k, v] : saved) keys.insert(k);
  for (const auto& [k, v] : now) keys.insert(k);
  std::vector<std::string> errors, changes;
  for (const auto& key : keys) {
    auto a = saved.find(key);
    auto b = now.find(key);
    const std::string before = a == saved.end() ? "(unset)" : a->second;
    const std::string after = b == now.end() ? "(unset)" : b->second;
    if (before == after || resume_free_keys().count(key) != 0) continue;
    const std::string line = fmt::format("{}: {} in the checkpoint, {} now", key, before, after);
    (resume_critical_keys().count(key) != 0 ? errors : changes).push_back(line);
  }
  if (!errors.empty()) {
    std::vector<std::string> messages;
    for (const auto& e : errors) {
      messages.push_back(
          fmt::format("--resume from {}: {}; resume with the configuration that "
                      "wrote it, or start a new run without --resume",
                      dir.string(), e));
    }
    throw ConfigError(messages);
  }
  return changes;
}

}  // namespace bertlab
