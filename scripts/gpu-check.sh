#!/usr/bin/env bash
# The CUDA check, for a machine with a GPU and Python's torch (CUDA) and transformers (the
# device tool's machine): builds bertlab against the libtorch inside that torch, runs the CUDA
# tests, gradcheck on the GPU, the GPU step benchmarks side by side with Hugging Face
# transformers, and the interop checks (docs/gpu.md, "Interop checks": a tiny run's export,
# eval logits and TensorBoard events read back by transformers, tokenizers and tensorboard through
# scripts/gpu_interop.py; torchrun's ranks; two CUDA process ranks). Everything goes to $OUT
# (default gpu-out/): gpu-check.log, results.jsonl, interop/.
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
# The device of the interop run (GPU_CHECK_INTEROP_DEVICE=cpu tries the interop stages on a
# machine without a GPU).
interop_device=${GPU_CHECK_INTEROP_DEVICE:-cuda}
build=${BUILD_DIR:-build-cuda}
results="$out/results.jsonl"
failed=()
stage() { echo; echo "=== [gpu-check] $* ($(date -u +%H:%M:%S))"; }
# record NAME OK [NOTE]: the JSON line of a stage that prints none of its own (OK: true, false,
# null for skipped).
record() {
  printf '{"stage": "%s", "ok": %s%s}\n' "$1" "$2" "${3:+, \"note\": \"$3\"}" | tee -a "$results"
}
# interop NAME COMMAND ARGS...: one check of scripts/gpu_interop.py, its JSON line to $results.
interop() {
  local name=$1 line rc
  shift
  line=$(timeout 180 "$py" scripts/gpu_interop.py "$@" --stage "$name")
  rc=$?
  [[ -n $line ]] && echo "$line" | tee -a "$results"
  ((rc == 0)) || failed+=("$name")
}

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
# bertlab, its plugins and the four test programs that hold the CUDA tests: the other test
# programs (most of a full build) have nothing to do on a GPU. GPU_CHECK_FULL_BUILD=1 builds all.
targets=(--target bertlab_launcher bertlab_cli bertlab_plugins dropout_rng_test precision_test
  strategy_test experiment_config_test)
[[ ${GPU_CHECK_FULL_BUILD:-0} == 1 ]] && targets=()
if BUILD_DIR="$build" JOBS=${JOBS:-$(nproc)} \
  CMAKE_ARGS="-DBERTLAB_TORCH_FROM_PYTHON=ON -DBERTLAB_PYTHON=$py ${CMAKE_ARGS:-}" \
  bash scripts/build.sh "${targets[@]}"; then
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

  stage "step benchmarks: BERT-Base, SQuAD 32 x 384 and pretraining 64 x 128 (MLM + NSP heads)"
  base="--hidden-size 768 --num-hidden-layers 12 --num-attention-heads 12 --intermediate-size 3072"
  py_base="--hidden_size 768 --num_hidden_layers 12 --num_attention_heads 12 --intermediate_size 3072"
  for shape in "squad 32 384" "pretrain 64 128"; do
    set -- $shape
    for precision in bf16 fp32; do
      tf32=$([[ $precision == fp32 ]] && echo --tf32)
      line=$("$bin" bench step --task "$1" $base --batch "$2" --seq "$3" --steps 10 \
        --device cuda --precision "$precision" $tf32) && echo "$line" | tee -a "$results" ||
        failed+=("bench-$1-$2x$3-$precision")
      line=$("$py" bench/python_reference.py --impl transformers --task "$1" $py_base \
        --batch "$2" --seq "$3" --steps 10 --device cuda --precision "$precision" $tf32) &&
        echo "$line" | tee -a "$results" ||
        echo "[gpu-check] transformers $1 $2x$3 $precision: failed"
    done
  done

  # Interop (issue 29): what bertlab writes, read back by the Python tools it is written for. A
  # tiny classifier (2 layers, hidden 32) on the 32 MRPC pairs of tests/data/experiments/mrpc32,
  # trained on the GPU with evaluation, TensorBoard events and the Hugging Face export.
  stage "interop: a tiny classifier on the GPU (eval logits, TensorBoard, export_hf)"
  ix="$out/interop"
  data="$root/tests/data"
  interop_steps=20
  interop_seq=128 # every mrpc32 pair fits: no truncation to agree on
  rm -rf "$ix"
  mkdir -p "$ix"
  cat > "$ix/interop.toml" << TOML
# Written by scripts/gpu-check.sh for its interop checks.
[experiment]
name = "interop"
seed = 7
threads = 1
tensorboard = true
export_hf = true

[model]
bert_config_file = '$data/experiments/bert_config_tiny.json'
vocab_file = '$data/vocab/bert-base-uncased/vocab.txt'
# Weights drawn wide: logits that differ from pair to pair by ~0.1 (at 0.02 they differ by
# ~1e-4, and a comparison at 1e-4 would not tell a wrong model from a right one).
initializer_range = 1.0

[task]
plugin = "classifier"
task_name = "mrpc"
data_dir = '$data/experiments/mrpc32'
max_seq_length = $interop_seq

[strategy]
plugin = "single"
device = "cpu"  # gpu-check runs it with --set strategy.device=$interop_device

[optimizer]
plugin = "adam_weight_decay"
learning_rate = 1e-3

[train]
train_batch_size = 8
eval_batch_size = 8
num_train_steps = $interop_steps
log_every_steps = 1
do_eval = true

[[variant]]
name = "classifier"
TOML
  variant="$ix/runs/interop/classifier"
  if timeout 180 "$bin" run "$ix/interop.toml" --set strategy.device="$interop_device" \
    --output-dir "$ix/runs"
  then
    record interop-run true
    ls -l "$variant" "$variant/hf" || true

    stage "interop: bertlab export --hf of the variant"
    if "$bin" export --hf "$variant" "$ix/hf"; then
      record interop-export true
    else
      record interop-export false
      failed+=(interop-export)
    fi

    stage "interop: transformers' BertForSequenceClassification on the export vs eval_logits.tsv"
    interop interop-logits logits --hf-dir "$ix/hf" --data-dir "$data/experiments/mrpc32" \
      --logits "$variant/eval_logits.tsv" --max-seq-length "$interop_seq" --count 8
    # export_hf's VARIANT/hf/ should hold the same bytes; if not, it gets its own logits check.
    same=true
    for f in config.json model.safetensors vocab.txt tokenizer_config.json \
      special_tokens_map.json; do
      cmp "$ix/hf/$f" "$variant/hf/$f" || same=false
    done
    if $same; then
      record interop-export-hf-same true "VARIANT/hf/ holds what bertlab export --hf writes"
    else
      interop interop-logits-export-hf logits --hf-dir "$variant/hf" \
        --data-dir "$data/experiments/mrpc32" --logits "$variant/eval_logits.tsv" \
        --max-seq-length "$interop_seq" --count 8
    fi

    stage "interop: TensorBoard's EventAccumulator on the variant's event file"
    interop interop-events events --run-dir "$variant" --expect-steps "$interop_steps"
  else
    record interop-run false
    failed+=(interop-run)
  fi

  stage "interop: bertlab tokenize --ids against tokenizers' BertWordPieceTokenizer"
  vocab="$data/vocab/bert-base-uncased/vocab.txt"
  for casing in lower cased; do
    interop "interop-tokenize-$casing" tokenize --vocab "$vocab" --bertlab "$bin" "--$casing" \
      --text "$data/glue/MRPC/dev.tsv" --lines 0
  done
  # Google's edge cases (tests/data/tokenizer/README.md): where tokenizers departs from Google's
  # rules it shows here. For the record, not a failure.
  line=$(timeout 120 "$py" scripts/gpu_interop.py tokenize --vocab "$vocab" --bertlab "$bin" \
    --lower --text "$data/tokenizer/google_cases.txt" --lines 0 \
    --stage interop-tokenize-google-cases-info)
  [[ -n $line ]] && echo "$line" | tee -a "$results"

  # Process ranks started by torchrun (docs/distributed.md): the launcher = "env" variants of
  # tests/data/experiments/launch.toml against one device, on the CPU (Gloo).
  stage "torchrun: 2 process ranks of launch.toml, gradcheck (CPU, Gloo)"
  bin_abs="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  launch_exp="$data/experiments/launch.toml"
  torchrun=()
  if command -v torchrun > /dev/null; then
    torchrun=(torchrun)
  elif "$py" -c 'import torch.distributed.run' 2> /dev/null; then
    torchrun=("$py" -m torch.distributed.run)
  fi
  if ((${#torchrun[@]})); then
    echo "[gpu-check] torchrun: ${torchrun[*]}"
    # What torchrun gives its workers. With TORCHELASTIC_USE_AGENT_STORE=True its agent already
    # serves the store at MASTER_ADDR:MASTER_PORT, so no rank may serve one there itself.
    timeout 60 "${torchrun[@]}" --nproc_per_node 2 --no_python env 2>&1 |
      grep -E '^(RANK|LOCAL_RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_[A-Z_]*)=' |
      sort | tee "$out/torchrun-env.txt"
    if timeout 120 "${torchrun[@]}" --nproc_per_node 2 --no_python "$bin_abs" gradcheck \
      "$launch_exp" --output-dir "$out/torchrun" --set strategy.timeout_s=60; then
      interop torchrun-gradcheck gradcheck --json "$out/torchrun/launch/gradcheck.json" \
        --backend gloo
    else
      record torchrun-gradcheck false "torchrun's default (static) rendezvous"
      failed+=(torchrun-gradcheck)
      # Tells the causes apart: the c10d rendezvous with the agent's store not shared (workers
      # get a free MASTER_PORT and TORCHELASTIC_USE_AGENT_STORE=False).
      echo "[gpu-check] again with --standalone and TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"
      if TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 timeout 120 "${torchrun[@]}" --standalone \
        --nproc_per_node 2 --no_python "$bin_abs" gradcheck "$launch_exp" \
        --output-dir "$out/torchrun-own-store" --set strategy.timeout_s=60; then
        record torchrun-gradcheck-own-store true "passes when rank 0 serves the store itself"
      else
        record torchrun-gradcheck-own-store false
      fi
    fi
  else
    echo "[gpu-check] no torchrun (nor torch.distributed.run in $py): skipped"
    record torchrun-gradcheck null "skipped: no torchrun"
  fi

  # Two CUDA process ranks (launcher = "env"); backend = "auto" is NCCL between CUDA processes.
  # NCCL wants a device per rank: on one GPU both ranks name cuda:0 and NCCL may refuse them
  # (duplicate GPU), and then Gloo runs with the CUDA tensors staged through the host.
  stage "2 CUDA process ranks: bertlab launch --nproc 2 gradcheck of launch.toml (NCCL, else Gloo)"
  gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())' 2> /dev/null || echo 0)
  cuda_device=cuda:0
  ((gpus >= 2)) && cuda_device=cuda # the device LOCAL_RANK
  echo "[gpu-check] $gpus GPU(s): the ranks use $cuda_device"
  launch_cuda() { # BACKEND: launch.toml's gradcheck by 2 ranks on $cuda_device
    NCCL_DEBUG=${NCCL_DEBUG:-WARN} timeout 120 "$bin_abs" launch --nproc 2 -- "$bin_abs" \
      gradcheck "$launch_exp" --set strategy.device="$cuda_device" --set strategy.backend="$1" \
      --set strategy.timeout_s=60 --output-dir "$out/launch-cuda-$1" 2>&1 |
      tee "$out/launch-cuda-$1.log"
  }
  if launch_cuda auto; then
    used=$(grep -o -m 1 -E '(NCCL|Gloo) over TCP store' "$out/launch-cuda-auto.log" |
      cut -d' ' -f1)
    echo "[gpu-check] 2 CUDA ranks on $cuda_device: ${used:-unknown} (backend = auto)"
    interop launch-cuda-gradcheck gradcheck --backend "${used:-auto}" \
      --json "$out/launch-cuda-auto/launch/gradcheck.json"
  else
    echo "[gpu-check] backend = auto (NCCL) failed on $cuda_device (above): Gloo with CUDA tensors"
    record launch-cuda-nccl false "NCCL, 2 ranks on $cuda_device"
    ((gpus >= 2)) && failed+=(launch-cuda-nccl) # a GPU each: NCCL has no reason to refuse
    if launch_cuda gloo; then
      echo "[gpu-check] 2 CUDA ranks on $cuda_device: Gloo (backend = gloo)"
      interop launch-cuda-gradcheck gradcheck --backend gloo \
        --json "$out/launch-cuda-gloo/launch/gradcheck.json"
    else
      record launch-cuda-gradcheck false "Gloo with CUDA tensors failed too"
      failed+=(launch-cuda-gradcheck)
    fi
  fi
else
  failed+=(build)
fi

stage "done"
if ((${#failed[@]})); then
  echo "[gpu-check] FAILED: ${failed[*]}"
  exit 1
fi
echo "[gpu-check] every stage passed; figures in $results"
