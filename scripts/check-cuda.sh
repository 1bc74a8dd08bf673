#!/usr/bin/env bash
# Compiles the CUDA-only sources (framework/host/**/cuda/*.cpp) for syntax against this machine's
# libtorch headers and CUDA toolkit, so a CPU-only build still catches a broken NCCL/CUDA path
# (against libtorch 1.13's c10d API; scripts/gpu-check.sh builds them for real against 2.x).
# Skipped, with a line saying so, when no CUDA toolkit is installed.
# Usage: scripts/check-cuda.sh   (needs a configured build: its compile_commands.json)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}
cuda_include=${CUDA_HOME:-/usr/local/cuda}/include
if [[ ! -f $cuda_include/cuda_runtime_api.h || ! -f $cuda_include/nccl.h ]]; then
  echo "[cuda-check] no CUDA toolkit with NCCL at $cuda_include; CUDA sources not checked"
  exit 0
fi
mapfile -t sources < <(git ls-files 'framework/host/**/cuda/*.cpp' 'framework/host/*/cuda/*.cpp' | sort -u)
# The flags libbertlab_host's sources build with (defines, include folders, standard).
mapfile -t flags < <(python3 - "$build_dir/compile_commands.json" <<'PY'
import json, shlex, sys
for entry in json.load(open(sys.argv[1])):
    if entry["file"].endswith("framework/host/comm/gloo_communicator.cpp"):
        args = shlex.split(entry["command"])
        keep, skip = [], False
        for a in args[1:]:
            if skip: skip = False; continue
            if a in ("-o", "-c", "-MF", "-MT"): skip = True; continue
            if a.startswith(("-D", "-I", "-isystem", "-std")) or keep and keep[-1] == "-isystem":
                keep.append(a)
        print("\n".join(keep))
        break
PY
)
if ((${#flags[@]} == 0)); then
  echo "[cuda-check] $build_dir/compile_commands.json has no libbertlab_host entry; build first" >&2
  exit 1
fi
for src in "${sources[@]}"; do
  "${CXX:-g++}" -fsyntax-only "${flags[@]}" -DUSE_C10D_NCCL \
    -isystem "$root/scripts/cuda-check" -isystem "$cuda_include" "$src"
done
echo "[cuda-check] ${#sources[@]} CUDA source(s) compile against libtorch's and $cuda_include's headers"
