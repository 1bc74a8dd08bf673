// The normal build's driver of a fuzz target: runs LLVMFuzzerTestOneInput once on every file
// named (or in every folder named), as libFuzzer does with file arguments, so that the suite
// replays every input that ever crashed (tests/fuzz-regressions/) and the seed corpus.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

static void replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "[fuzz] replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

int main(int argc, char** argv) {
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    if (fs::is_directory(arg)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::recursive_directory_iterator(arg)) {
        if (entry.is_regular_file() && entry.path().filename() != "README.md") {
          files.push_back(entry.path());
        }
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) replay(f), ++replayed;
    } else if (fs::is_regular_file(arg)) {
      replay(arg), ++replayed;
    } else if (arg.parent_path().filename() == "fuzz-regressions") {
      // A target's regressions folder exists once something crashed it.
      std::fprintf(stderr, "[fuzz] %s: no regressions yet\n", argv[i]);
    } else {
      std::fprintf(stderr, "[fuzz] %s: no such file or folder\n", argv[i]);
      return 2;
    }
  }
  std::fprintf(stderr, "[fuzz] %zu inputs replayed, none crashed\n", replayed);
  return 0;
}
