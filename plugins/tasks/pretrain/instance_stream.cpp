#include "instance_stream.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>

namespace bertlab::pretrain {

std::string StreamPosition::to_text() const {
  nlohmann::ordered_json j;
  j["pass"] = pass;
  j["offset"] = file.offset;
  j["record"] = file.record;
  j["instances"] = instances;
  return j.dump();
}

StreamPosition StreamPosition::from_text(const std::string& text, const std::string& where) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    StreamPosition p;
    p.pass = j.at("pass").get<int64_t>();
    p.file.offset = j.at("offset").get<uint64_t>();
    p.file.record = j.at("record").get<int64_t>();
    p.instances = j.at("instances").get<int64_t>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(
        fmt::format("{}: not a pretrain stream position ({}): {}", where, text, e.what()));
  }
}

InstanceStream::InstanceStream(std::filesystem::path path, InstanceShape shape, StreamShard shard,
                               StreamPosition start, int64_t prefetch_batches)
    : path_(std::move(path)),
      shape_(shape),
      shard_(shard),
      capacity_(static_cast<size_t>(std::max<int64_t>(1, prefetch_batches))),
      consumed_(start),
      start_(start) {
  BERTLAB_CHECK(shard_.micro_batch > 0 && shard_.count > 0 && shard_.begin >= 0 &&
                    shard_.begin + shard_.count <= shard_.micro_batch,
                "pretrain stream: shard [{}, {}) of micro-batches of {} is not valid", shard_.begin,
                shard_.begin + shard_.count, shard_.micro_batch);
  thread_ = std::thread([this] { produce(); });
}

InstanceStream::~InstanceStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void InstanceStream::produce() {
  try {
    StreamPosition at = start_;
    auto reader = std::make_unique<InstanceReader>(path_, shape_, at.file);
    // Reads one instance (into *out unless nullptr), starting the next pass at the end.
    auto read = [&](InstanceFeatures* out) {
      if (reader->next(out)) return;
      if (at.pass == 0 && at.instances == 0 && reader->position().offset == 0) {
        throw DataError(fmt::format(
            "{}: no instances; create them with `bertlab pretrain create-data`", path_.string()));
      }
      ++at.pass;
      reader = std::make_unique<InstanceReader>(path_, shape_);
      if (!reader->next(out)) {
        throw DataError(
            fmt::format("{}: no instances at the start of pass {}", path_.string(), at.pass));
      }
    };
    std::vector<int64_t> rows(static_cast<size_t>(shard_.count));
    for (int64_t i = 0; i < shard_.count; ++i) rows[static_cast<size_t>(i)] = i;
    for (;;) {
      std::vector<InstanceFeatures> mine;
      mine.reserve(static_cast<size_t>(shard_.count));
      for (int64_t i = 0; i < shard_.micro_batch; ++i) {
        const bool own = i >= shard_.begin && i < shard_.begin + shard_.count;
        if (own) {
          mine.emplace_back();
          read(&mine.back());
        } else {
          read(nullptr);
        }
        ++at.instances;
      }
      at.file = reader->position();
      Item item{collate(mine, rows, c10::Device(c10::kCPU)), at};
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || queue_.size() < capacity_; });
      if (stop_) return;
      queue_.push_back(std::move(item));
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
    changed_.notify_all();
  }
}

Batch InstanceStream::next(const c10::Device& device) {
  Item item;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !queue_.empty() || error_ != nullptr; });
    if (queue_.empty()) std::rethrow_exception(error_);
    item = std::move(queue_.front());
    queue_.pop_front();
    consumed_ = item.after;
  }
  changed_.notify_all();
  if (!device.is_cpu()) {
    for (auto& [name, tensor] : item.batch) tensor = tensor.to(device);
  }
  return std::move(item.batch);
}

std::string InstanceStream::position() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return consumed_.to_text();
}

size_t InstanceStream::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

}  // namespace bertlab::pretrain
