#!/usr/bin/env bash
# Installs the Debian packages bertlab needs.
#   scripts/setup-deps.sh           to build, run and test (scripts/test.sh)
#   scripts/setup-deps.sh --run     to build and run bertlab and its plugins only (quickstart)
# Idempotent: only missing packages are installed, and `apt-get update` runs only
# when something is missing.
set -euo pipefail

run_only=0
for arg in "$@"; do
  case "$arg" in
    --run) run_only=1 ;;
    *)
      echo "usage: scripts/setup-deps.sh [--run] (got '$arg')" >&2
      exit 2
      ;;
  esac
done

# What building and running bertlab and its plugins needs.
packages=(
  g++ cmake make ninja-build ccache pkg-config git python3
  libtorch-dev libopenblas0-pthread libgloo-dev
  libdnnl-dev  # oneDNN (libtorch's own dependency): the float32 matrix products, runtime/gemm.h
  libtomlplusplus-dev libfmt-dev libboost-dev libboost-filesystem-dev
  nlohmann-json3-dev libutf8proc-dev libcli11-dev libleveldb-dev libsnappy-dev libzip-dev
)
# What the tests, the lint and the benchmarks need on top.
test_packages=(
  libgtest-dev
  clang-format
  clang-14 libclang-rt-14-dev libfuzzer-14-dev  # scripts/fuzz.sh, scripts/test.sh --sanitize=...
  python3-torch  # bench/python_reference.py: the same step in PyTorch, on the same libtorch
  chromium  # report_test: renders runs/<experiment>/report.html headless to a PNG
  slurm-wlm munge  # tests/slurm: a real one-node Slurm, started and stopped by the test
  iproute2  # tests/two_hosts: two network namespaces joined by a veth pair
)
if ((run_only == 0)); then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "[setup] all ${#packages[@]} packages present"
  exit 0
fi

echo "[setup] installing: ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
