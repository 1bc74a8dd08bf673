// The machine record of regression baselines: see machine.h.

#include "runtime/machine.h"

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "runtime/gemm.h"
#include "runtime/threads.h"

namespace bertlab {

namespace {

/// /proc/cpuinfo's first value of `key` ("model name", "flags"), or "".
std::string cpuinfo(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

/// The vector extensions among the CPU's flags that change which float kernel runs (libtorch's
/// dispatch by capability, OpenBLAS's choice of core, the fused multiply-add's rounding).
std::string vector_flags() {
  static const char* const kFlags[] = {"sse4_2",      "avx",         "avx2",        "fma",
                                       "f16c",        "avx512f",     "avx512bw",    "avx512vl",
                                       "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16"};
  std::set<std::string> present;
  std::istringstream words(cpuinfo("flags"));
  for (std::string w; words >> w;) present.insert(w);
  std::string out;
  for (const char* f : kFlags) {
    if (present.count(f) == 0) continue;
    out += out.empty() ? "" : " ";
    out += f;
  }
  return out;
}

/// libtorch's kernel dispatch level ("AVX512", "AVX2", "DEFAULT"), from its configuration
/// report's "CPU capability usage" line (the function behind it is not exported).
std::string cpu_capability() {
  std::istringstream config(at::show_config());
  const std::string key = "CPU capability usage:";
  for (std::string line; std::getline(config, line);) {
    const auto at = line.find(key);
    if (at == std::string::npos) continue;
    const auto start = line.find_first_not_of(' ', at + key.size());
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

/// OpenBLAS's kernel for this CPU ("SkylakeX", "Haswell", "Cooperlake"), looked up at run time
/// as runtime/threads.cpp does; "" with another BLAS.
std::string blas_core() {
  auto corename = reinterpret_cast<char* (*)()>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return corename == nullptr ? "" : corename();
}

}  // namespace

nlohmann::ordered_json machine_record() {
  nlohmann::ordered_json m;
  m["cpu"] = cpuinfo("model name");
  m["cpu_flags"] = vector_flags();
  m["aten_cpu_capability"] = cpu_capability();
  m["blas"] = blas_description();
  m["blas_core"] = blas_core();
  m["gemm"] = gemm_backend() == GemmBackend::kOneDnn
                  ? fmt::format("onednn: {}", onednn_description())
                  : std::string("blas");
  m["openblas_coretype"] = environment("OPENBLAS_CORETYPE");
  m["aten_cpu_capability_env"] = environment("ATEN_CPU_CAPABILITY");
  m["libtorch"] = TORCH_VERSION;
  m["intra_op_threads"] = std::to_string(at::get_num_threads());
  m["cores"] = std::to_string(std::thread::hardware_concurrency());
  return m;
}

std::vector<std::string> machine_differences(const nlohmann::json& here,
                                             const nlohmann::json& there) {
  std::vector<std::string> out;
  const auto text = [](const nlohmann::json& record, const std::string& key) {
    if (!record.is_object() || !record.contains(key)) return std::string("(not recorded)");
    const auto& v = record.at(key);
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  std::set<std::string> keys;
  for (const auto* record : {&here, &there}) {
    if (!record->is_object()) continue;
    for (const auto& [key, value] : record->items()) keys.insert(key);
  }
  for (const auto& key : keys) {
    const std::string a = text(here, key);
    const std::string b = text(there, key);
    if (a != b) out.push_back(fmt::format("{}: \"{}\" here, \"{}\" in the baseline", key, a, b));
  }
  return out;
}

std::string machine_summary(const nlohmann::json& record) {
  const auto text = [&](const char* key) {
    return record.is_object() && record.contains(key) && record.at(key).is_string()
               ? record.at(key).get<std::string>()
               : std::string("?");
  };
  return fmt::format(
      "{} ({}; libtorch dispatch {}), BLAS core {}, matrix products {}, libtorch {}, {} thread(s)",
      text("cpu"), text("cpu_flags"), text("aten_cpu_capability"), text("blas_core"), text("gemm"),
      text("libtorch"), text("intra_op_threads"));
}

}  // namespace bertlab
