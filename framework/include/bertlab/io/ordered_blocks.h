#pragma once
// Encoding on several threads, writing in order: the items of an output file (records, JSON
// lines) are encoded block by block on worker threads while the calling thread writes the
// finished blocks in their order, so the file is byte for byte what one thread would write.

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace bertlab {

/// The threads to encode on by default: the machine's cores, at least one.
inline int default_encode_threads() {
  return static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

/// Calls encode(b, block) for b in [0, blocks) on `threads` worker threads and write(b, block)
/// on the calling thread for b = 0, 1, ... in order, each after its encode(). At most
/// 2 × threads blocks are encoded ahead of the writing, which bounds the memory. `Block` is
/// default-constructible; a block object is reused (clear it in encode()). With threads <= 1 both
/// run on the calling thread. An exception from either stops the work and is rethrown here.
template <typename Block, typename Encode, typename Write>
void encode_blocks_in_order(size_t blocks, int threads, Encode&& encode, Write&& write) {
  if (threads <= 1 || blocks <= 1) {
    Block block;
    for (size_t b = 0; b < blocks; ++b) {
      encode(b, block);
      write(b, block);
    }
    return;
  }
  const size_t window = 2 * static_cast<size_t>(threads);
  std::vector<Block> slots(window);
  std::vector<char> ready(window, 0);
  std::mutex mutex;
  std::condition_variable changed;
  size_t next_to_encode = 0;
  size_t next_to_write = 0;
  bool stop = false;
  std::exception_ptr failure;
  const auto fail = [&](std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!failure) failure = std::move(e);
    stop = true;
    changed.notify_all();
  };
  const auto worker = [&] {
    for (;;) {
      size_t b = 0;
      {
        std::unique_lock<std::mutex> lock(mutex);
        // A slot is free once the block that used it last has been written.
        changed.wait(lock, [&] {
          return stop || next_to_encode >= blocks || next_to_encode < next_to_write + window;
        });
        if (stop || next_to_encode >= blocks) return;
        b = next_to_encode++;
      }
      try {
        encode(b, slots[b % window]);
      } catch (...) {
        fail(std::current_exception());
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      ready[b % window] = 1;
      changed.notify_all();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  try {
    for (size_t b = 0; b < blocks; ++b) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return stop || ready[b % window] != 0; });
        if (stop) break;
      }
      write(b, slots[b % window]);
      std::lock_guard<std::mutex> lock(mutex);
      ready[b % window] = 0;
      ++next_to_write;
      changed.notify_all();
    }
  } catch (...) {
    fail(std::current_exception());
  }
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace bertlab
