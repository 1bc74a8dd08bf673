#pragma once
// What every fuzz target shares: the input written to a scratch file (the readers take paths,
// as the commands do), and the rule that bad input may only end in a bertlab::Error.

#include <bertlab/error.h>
#include <bertlab/log.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>

namespace bertlab::fuzz {

/// This process's scratch folder (under $TMPDIR, else /dev/shm or /tmp), made once.
std::filesystem::path scratch_dir();

/// Writes `data` to scratch_dir()/name and returns its path (the same path every call).
std::filesystem::path write_scratch(const std::string& name, const uint8_t* data, size_t size);

/// The folder of the project's test data (tests/data).
std::filesystem::path test_data(const std::string& relative);

/// Logs warnings and errors only: readers log every skipped record, which would drown the
/// fuzzer's own output.
void quiet_logs();

/// Runs `read`: a bertlab::Error (the clear message bad input must get) is the expected end;
/// any other exception escaping a reader is a bug, reported and turned into a crash.
template <typename F>
void expect_only_bertlab_errors(F&& read) {
  try {
    read();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[fuzz] an exception that is not a bertlab::Error escaped: %s\n",
                 e.what());
    std::abort();
  }
}

}  // namespace bertlab::fuzz
