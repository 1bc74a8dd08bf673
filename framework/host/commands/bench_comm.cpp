// `bertlab bench comm`: times all-reduce and all-gather over Gloo thread ranks.

#include "commands/bench_comm.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "comm/gloo_communicator.h"

namespace bertlab {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int bench_comm(const CommBenchOptions& options) {
  BERTLAB_CHECK_AS(ConfigError, options.world >= 2, "bench comm --world: must be >= 2, got {}",
                   options.world);
  BERTLAB_CHECK_AS(ConfigError, options.mb > 0, "bench comm --mb: must be > 0, got {}", options.mb);
  BERTLAB_CHECK_AS(ConfigError, options.iterations >= 1, "bench comm --iters: must be >= 1, got {}",
                   options.iterations);
  const auto elements = static_cast<int64_t>(options.mb * 1024 * 1024 / 4);
  auto store = RendezvousStore::in_process();
  std::vector<double> reduce_s, gather_s;
  std::vector<std::string> errors(options.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < options.world; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = make_gloo_communicator(*store, r, options.world, std::chrono::seconds(300));
        std::vector<at::Tensor> buffer{at::ones({elements}, at::kFloat)};
        const at::Tensor part = at::ones({elements / options.world}, at::kFloat);
        for (int i = 0; i <= options.iterations; ++i) {
          comm->barrier();
          auto t0 = std::chrono::steady_clock::now();
          comm->all_reduce_sum(buffer);
          auto t1 = std::chrono::steady_clock::now();
          comm->barrier();
          auto t2 = std::chrono::steady_clock::now();
          comm->all_gather(part);
          auto t3 = std::chrono::steady_clock::now();
          if (r == 0 && i > 0) {  // the first round warms up
            reduce_s.push_back(std::chrono::duration<double>(t1 - t0).count());
            gather_s.push_back(std::chrono::duration<double>(t3 - t2).count());
          }
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) BERTLAB_CHECK(e.empty(), "bench comm: {}", e);
  const double bytes = static_cast<double>(elements) * 4;
  const double n = options.world;
  const double ar = median(reduce_s), ag = median(gather_s);
  nlohmann::ordered_json j;
  j["world"] = options.world;
  j["mb"] = options.mb;
  j["backend"] = "gloo";
  j["all_reduce_s"] = ar;
  // Algorithm bandwidth: the buffer over the time; bus bandwidth: what each rank's link carries
  // in a ring all-reduce, 2(N-1)/N of the buffer (NCCL's convention).
  j["all_reduce_algbw_gbps"] = bytes / ar / 1e9;
  j["all_reduce_busbw_gbps"] = bytes * 2 * (n - 1) / n / ar / 1e9;
  j["all_gather_s"] = ag;
  j["all_gather_algbw_gbps"] = bytes / ag / 1e9;
  j["all_gather_busbw_gbps"] = bytes * (n - 1) / n / ag / 1e9;
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace bertlab
