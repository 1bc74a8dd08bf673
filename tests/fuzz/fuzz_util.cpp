#include "fuzz_util.h"

#include <unistd.h>

#include <fstream>

namespace bertlab::fuzz {

namespace fs = std::filesystem;

fs::path scratch_dir() {
  static const fs::path dir = [] {
    fs::path base = "/tmp";
    if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') {
      base = t;
    } else if (fs::is_directory("/dev/shm")) {
      base = "/dev/shm";
    }
    fs::path d = base / ("bertlab-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

fs::path write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const fs::path path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::fprintf(stderr, "[fuzz] cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

fs::path test_data(const std::string& relative) {
  return fs::path(BERTLAB_TEST_DATA_DIR) / relative;
}

void quiet_logs() { set_log_level(LogLevel::kError); }

}  // namespace bertlab::fuzz
