#pragma once
// A replica's stream of pretraining instances: a background thread reads the file in order
// (again from the start at its end, as run_pretraining.py's repeat()), keeps this replica's
// part of each micro-batch, collates it, and queues at most `prefetch_batches` batches ahead.

#include <bertlab/task.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "instance_reader.h"

namespace bertlab::pretrain {

/// Where a stream stands: passes over the file completed, the position in the current pass,
/// and the instances read in all (the position's text form is JSON).
struct StreamPosition {
  int64_t pass = 0;
  FilePosition file;
  int64_t instances = 0;

  std::string to_text() const;
  /// Throws DataError naming `where` for text that is not a stream position.
  static StreamPosition from_text(const std::string& text, const std::string& where);
};

class InstanceStream : public TrainStream {
 public:
  InstanceStream(std::filesystem::path path, InstanceShape shape, StreamShard shard,
                 StreamPosition start, int64_t prefetch_batches);
  ~InstanceStream() override;
  InstanceStream(const InstanceStream&) = delete;
  InstanceStream& operator=(const InstanceStream&) = delete;

  /// Rethrows, on the caller's thread, an error the reader met (a malformed record, ...).
  Batch next(const c10::Device& device) override;
  std::string position() const override;
  /// Batches read ahead and waiting (for tests: never more than prefetch_batches).
  size_t queued() const;

 private:
  struct Item {
    Batch batch;  // on the CPU
    StreamPosition after;
  };

  void produce();

  std::filesystem::path path_;
  InstanceShape shape_;
  StreamShard shard_;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  StreamPosition consumed_;  // after the last batch next() returned
  StreamPosition start_;
  std::thread thread_;  // last: started when everything above is ready
};

}  // namespace bertlab::pretrain
