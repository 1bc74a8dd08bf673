// What a floating-point result depends on besides the code: the CPU, its vector units as libtorch
// and OpenBLAS use them, the BLAS kernel, libtorch's version and the thread counts. A regression
// baseline records it, so a difference can be told apart as the machine's or the code's.

#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bertlab {

/// This machine and process, as a flat JSON object of strings (keys below, in this order):
/// cpu, cpu_flags (the vector extensions present, of those a float kernel may choose),
/// aten_cpu_capability, blas, blas_core, gemm (the matrix products' backend and its kernels:
/// runtime/gemm.h), openblas_coretype and aten_cpu_capability_env (the
/// variables as found; empty: unset), libtorch, intra_op_threads, cores.
nlohmann::ordered_json machine_record();

/// "key: a here, b there" for each key whose value differs between two records (a key missing
/// from one side counts as differing); empty when the machines are alike.
std::vector<std::string> machine_differences(const nlohmann::json& here,
                                             const nlohmann::json& there);

/// One line: "cpu (flags), BLAS core, libtorch V, T threads".
std::string machine_summary(const nlohmann::json& record);

}  // namespace bertlab
