// The stop flag set by SIGINT/SIGTERM and the ranks' agreement on it.

#include "train/stop_signal.h"

#include <ATen/ATen.h>

#include <atomic>
#include <csignal>
#include <vector>

namespace bertlab {

namespace {

// The first signal sets this; the handler then restores the default, so that a second signal
// kills at once.
std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int signal) {
  g_stop_signal.store(signal);
  std::signal(signal, SIG_DFL);
}

}  // namespace

void install_stop_handlers() {
  g_stop_signal.store(0);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

int stop_signal_received() { return g_stop_signal.load(); }

bool ranks_agree_to_stop(Communicator& comm) {
  double stop_flag = g_stop_signal.load();
  if (comm.world_size() > 1) {
    std::vector<at::Tensor> flag{at::tensor({stop_flag}, at::kDouble)};
    comm.all_reduce_sum(flag);
    stop_flag = flag[0].item<double>();
  }
  return stop_flag != 0;
}

const char* signal_name(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

}  // namespace bertlab
