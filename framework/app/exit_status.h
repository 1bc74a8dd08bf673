#pragma once
// What both `bertlab` executables (app/main.cpp, the host; app/launcher.cpp, the front that runs
// the data commands without libtorch) do with the command line's --verbose and with an
// exception: its message without C++ stack traces and the exit code, 2 for configuration and
// plugin errors, 1 for anything else.

#include <bertlab/error.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>

namespace bertlab {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitConfig = 2;

/// Takes `--verbose` out of argv (before a `--`, after which the arguments are another
/// command's) and turns it into BERTLAB_DEBUG=1, which every command and the ranks that
/// `bertlab launch` starts read. Returns the new argc.
inline int take_verbose_flag(int argc, char** argv) {
  int out = 0;
  bool passthrough = false;
  for (int i = 0; i < argc; ++i) {
    if (!passthrough && i > 0 && std::strcmp(argv[i], "--verbose") == 0) {
      setenv("BERTLAB_DEBUG", "1", 1);
      continue;
    }
    passthrough |= std::strcmp(argv[i], "--") == 0;
    argv[out++] = argv[i];
  }
  argv[out] = nullptr;
  return out;
}

/// Prints the exception being handled (call it in a catch block) and returns its exit code.
/// Messages keep their first part (the what); libtorch's C++ stack traces only with
/// BERTLAB_DEBUG=1 or --verbose (without_stack_trace).
inline int report_exception() {
  try {
    throw;
  } catch (const ConfigError& e) {
    for (const auto& line : e.messages()) std::cerr << without_stack_trace(line) << "\n";
    std::cerr << fmt::format("bertlab: {} configuration error{}; nothing was run\n",
                             e.messages().size(), e.messages().size() == 1 ? "" : "s");
    return kExitConfig;
  } catch (const PluginError& e) {
    std::cerr << error_text(e) << "\n";
    return kExitConfig;
  } catch (const Interrupted& e) {
    std::cerr << error_text(e) << "\n";
    return 128 + e.signal();
  } catch (const Error& e) {
    std::cerr << "error: " << error_text(e) << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "error: " << error_text(e) << "\n";
    return kExitFailure;
  }
}

}  // namespace bertlab
