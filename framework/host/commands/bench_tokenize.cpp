// `bertlab bench tokenize`: the tokenizer's throughput on a text file (MB/s and tokens/s, on one
// thread and on all).

#include <bertlab/error.h>
#include <bertlab/text/tokenizer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "commands/bench_tokenize.h"

namespace bertlab {

int bench_tokenize(const TokenizeBenchOptions& o) {
  if (o.vocab_file.empty() || o.input.empty()) {
    throw ConfigError("bench tokenize: --vocab and --input are required");
  }
  std::ifstream in(o.input, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("bench tokenize: --input {}: cannot read", o.input));
  std::vector<std::string> lines;
  size_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    bytes += line.size() + 1;
    lines.push_back(std::move(line));
  }
  const FullTokenizer tokenizer(o.vocab_file, o.do_lower_case);
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  // Seconds to tokenize every line with `n` threads (each a contiguous share of the lines),
  // and the word pieces made.
  auto run = [&](int n) {
    std::atomic<int64_t> pieces{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = lines.size() * static_cast<size_t>(t) / static_cast<size_t>(n);
        const size_t end = lines.size() * static_cast<size_t>(t + 1) / static_cast<size_t>(n);
        int64_t mine = 0;
        for (size_t i = begin; i < end; ++i) {
          mine += static_cast<int64_t>(tokenizer.tokenize_to_ids(lines[i]).size());
        }
        pieces += mine;
      });
    }
    for (auto& t : pool) t.join();
    return std::pair<double, int64_t>{
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
        pieces.load()};
  };
  auto best = [&](int n) {
    std::pair<double, int64_t> out{1e30, 0};
    for (int r = 0; r < std::max(1, o.repeats); ++r) {
      const auto got = run(n);
      if (got.first < out.first) out = got;
    }
    return out;
  };
  const auto one = best(1);
  const auto all = best(threads);
  const double mb = static_cast<double>(bytes) / 1e6;
  nlohmann::ordered_json j;
  j["input_mb"] = mb;
  j["lines"] = lines.size();
  j["tokens"] = one.second;
  j["mb_per_s_1_thread"] = mb / one.first;
  j["tokens_per_s_1_thread"] = static_cast<double>(one.second) / one.first;
  j["threads"] = threads;
  j["mb_per_s_all_threads"] = mb / all.first;
  j["tokens_per_s_all_threads"] = static_cast<double>(all.second) / all.first;
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace bertlab
