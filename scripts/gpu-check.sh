#!/usr/bin/env bash
# The CUDA check, for a machine with a GPU and Python's torch (CUDA) and transformers (the
# device tool's machine): builds bertlab against the libtorch inside that torch, runs the CUDA
# tests, gradcheck on the GPU, and the GPU step benchmarks side by side with Hugging Face
# transformers. Everything goes to $OUT (default gpu-out/): gpu-check.log, results.jsonl.
#
#   OUT=/some/dir scripts/gpu-check.sh          (about 10 minutes on one H200)
#
# A machine without Debian's -dev packages builds with the dependency bundle that
# scripts/gpu-deps-bundle.sh makes (gpu-deps/, or $BERTLAB_GPU_DEPS), when there is one.
#
# Each stage says what it does; a failed stage is reported and the later ones still run.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
exec > >(tee -a "$out/gpu-check.log") 2>&1
py=${BERTLAB_PYTHON:-python3}
build=${BUILD_DIR:-build-cuda}
results="$out/results.jsonl"
failed=()
stage() { echo; echo "=== [gpu-check] $* ($(date -u +%H:%M:%S))"; }

stage "dependency bundle"
deps=${BERTLAB_GPU_DEPS:-$root/gpu-deps}
deps_include=()
if [[ ! -f $deps/MANIFEST ]]; then
  echo "[gpu-check] no dependency bundle in $deps: the build uses this machine's packages"
elif BERTLAB_PYTHON=$py bash scripts/gpu-deps-bundle.sh --check "$deps" "$out/deps-env.sh"; then
  # CMAKE_PREFIX_PATH, PKG_CONFIG_PATH and LD_LIBRARY_PATH, for the build and everything it runs.
  # shellcheck source=/dev/null
  source "$out/deps-env.sh"
  CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$BERTLAB_GPU_DEPS_PREFIX ${CMAKE_ARGS:-}"
  deps_include=(-isystem "$BERTLAB_GPU_DEPS_PREFIX/include")
  # scripts/build.sh configures only a new build folder; one configured without the bundle
  # (an earlier run on this machine) is configured again.
  if [[ -f $build/CMakeCache.txt ]] &&
    ! grep -q "^CMAKE_PREFIX_PATH:.*$BERTLAB_GPU_DEPS_PREFIX" "$build/CMakeCache.txt"; then
    echo "[gpu-check] $build was configured without the bundle: configuring it again"
    rm "$build/CMakeCache.txt"
  fi
else
  failed+=(gpu-deps)
  echo "[gpu-check] the bundle in $deps does not fit this machine (above); it is not used"
fi

stage "machine"
nvidia-smi || failed+=(nvidia-smi)
"$py" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda,
  "devices", torch.cuda.device_count(), torch.cuda.get_device_name(0))' || failed+=(torch)
"$py" -c 'import transformers; print("transformers", transformers.__version__)' ||
  echo "[gpu-check] no transformers: the side-by-side rows will be missing"

stage "build dependencies"
missing=()
for header in toml++/toml.hpp fmt/format.h boost/dll.hpp nlohmann/json.hpp CLI/CLI.hpp \
  utf8proc.h leveldb/table.h snappy.h zip.h gtest/gtest.h; do
  echo "#include <$header>" | g++ -std=c++17 "${deps_include[@]}" -fsyntax-only -x c++ - \
    2> /dev/null ||
    missing+=("$header")
done
if ((${#missing[@]})); then
  echo "[gpu-check] headers missing here: ${missing[*]}; install their Debian -dev packages"
  echo "[gpu-check] (scripts/setup-deps.sh lists them) or carry a prefix and set CMAKE_PREFIX_PATH"
fi

stage "build against python's libtorch"
if BUILD_DIR="$build" JOBS=${JOBS:-$(nproc)} \
  CMAKE_ARGS="-DBERTLAB_TORCH_FROM_PYTHON=ON -DBERTLAB_PYTHON=$py ${CMAKE_ARGS:-}" \
  bash scripts/build.sh; then
  grep -E "CUDA: (ON|OFF)" "$build/CMakeCache.txt" > /dev/null 2>&1 || true
  bin="$build/bin/bertlab"

  stage "CUDA tests: communicator (NCCL), config, precision"
  ctest --test-dir "$build" --output-on-failure -j 4 \
    -R "Communicator|ExperimentConfig|Precision|GradientAveraging|DropoutMask" || failed+=(ctest)

  stage "gradcheck on the GPU: mirrored and bf16 against fp32 on cuda"
  "$bin" gradcheck experiments/mixed-precision.toml --set strategy.device=cuda \
    --output-dir "$out/gradcheck" || failed+=(gradcheck-precision)
  "$bin" gradcheck experiments/gradient-averaging.toml --set strategy.device=cuda \
    --variant single --variant mirrored-2 --variant sparse-allgather-2 \
    --output-dir "$out/gradcheck" || failed+=(gradcheck-averaging)
  "$bin" gradcheck experiments/adversarial.toml --set strategy.device=cuda \
    --variant single --variant mirrored-2 --variant sparse-allgather-2 --variant batch-norm-2 \
    --output-dir "$out/gradcheck" || failed+=(gradcheck-adversarial)

  stage "dropout masks on the GPU: per-example against replica, BERT-Base 32 x 128"
  line=$("$bin" bench step --hidden-size 768 --num-hidden-layers 12 --num-attention-heads 12 \
    --intermediate-size 3072 --batch 32 --seq 128 --steps 10 --device cuda --precision bf16 \
    --dropout 0.1 --dropout-rng both) && echo "$line" | tee -a "$results" ||
    failed+=(bench-dropout)

  stage "step benchmarks: BERT-Base, SQuAD 32 x 384 and pretraining-size 64 x 128"
  base="--hidden-size 768 --num-hidden-layers 12 --num-attention-heads 12 --intermediate-size 3072"
  for shape in "32 384" "64 128"; do
    set -- $shape
    for precision in bf16 fp32; do
      tf32=$([[ $precision == fp32 ]] && echo --tf32)
      line=$("$bin" bench step $base --batch "$1" --seq "$2" --steps 10 --device cuda \
        --precision "$precision" $tf32) && echo "$line" | tee -a "$results" ||
        failed+=("bench-$1x$2-$precision")
      line=$("$py" bench/python_reference.py --impl transformers $base --batch "$1" \
        --seq "$2" --steps 10 --device cuda --precision "$precision" $tf32) &&
        echo "$line" | tee -a "$results" || echo "[gpu-check] transformers $1x$2 $precision: failed"
    done
  done
else
  failed+=(build)
fi

stage "done"
if ((${#failed[@]})); then
  echo "[gpu-check] FAILED: ${failed[*]}"
  exit 1
fi
echo "[gpu-check] every stage passed; figures in $results"
