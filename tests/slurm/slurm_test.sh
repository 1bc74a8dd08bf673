#!/usr/bin/env bash
# bertlab under a real one-node Slurm (tests/slurm/cluster.sh starts it in a temporary folder):
#
#   a. `srun -n 2 bertlab gradcheck tests/data/experiments/slurm.toml` with MASTER_ADDR,
#      MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK unset: the two Slurm tasks are the ranks of
#      the launcher = "env" variants and find rank 0 from SLURM_JOB_NODELIST and SLURM_JOB_ID;
#      every variant must match the one-device reference.
#   b. `sbatch --array=0-1 --wait`: task i runs `bertlab run ... --variant V_i` (`single`,
#      `single-lr2`), plain one-process runs although Slurm sets SLURM_PROCID in the batch step;
#      both tasks must end COMPLETED with exit code 0 and leave their metrics.jsonl.
#   c. `bertlab submit --slurm --wait` of 3 variants × 2 seeds (one a 2-rank launcher = "env"
#      variant, started by srun): every run completes, `bertlab compare` aggregates 2 seeds per
#      variant, and a second submit submits nothing.
#   d. `bertlab submit --slurm` (no --wait) of a study in two stages (`from-single` starts from
#      `single`, [model] init_from) × 2 seeds: the second array is submitted with
#      --dependency=afterok: on the first, both complete, and each run of the second stage
#      loaded the final weights of the first stage's run of its seed.
#
# usage: slurm_test.sh BERTLAB_EXE
# Exits 77 (skipped) when not root or when Slurm (slurm-wlm) or munge is not installed
# (scripts/setup-deps.sh installs them). The cluster is stopped and the folder removed on exit,
# failed or not. Each part is bounded (timeout 300 s, srun/sbatch --time=5), well inside the ctest
# TIMEOUT of 900 s, so that the EXIT trap, not ctest's kill, stops the cluster.
set -euo pipefail
export LC_ALL=C  # a "." in $EPOCHREALTIME, for elapsed()

if [[ $# -ne 1 ]]; then
  echo "usage: $0 BERTLAB_EXE" >&2
  exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
toml="$repo/tests/data/experiments/slurm.toml"
experiment="slurm"  # [experiment] name in $toml

if [[ "$(id -u)" -ne 0 ]]; then
  echo "skipped: needs root (the test cluster runs slurmctld and slurmd with SlurmUser=root)"
  exit 77
fi
for cmd in srun sbatch sinfo squeue scontrol slurmctld slurmd munged munge unmunge python3; do
  if ! command -v "$cmd" >/dev/null 2>&1; then
    echo "skipped: '$cmd' not found (install slurm-wlm and munge: scripts/setup-deps.sh)"
    exit 77
  fi
done

if [[ ! -f "$1" || ! -x "$1" ]]; then
  echo "error: $1 is not an executable (build bertlab first)" >&2
  exit 1
fi
exe="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"

# Nothing from a surrounding launcher or Slurm job may leak in: srun would take an inherited
# SLURM_JOB_ID for an allocation of this cluster, bertlab would take RANK or MASTER_ADDR.
while read -r var; do
  case "$var" in
    SLURM_* | MASTER_ADDR | MASTER_PORT | RANK | WORLD_SIZE | LOCAL_RANK | LOCAL_WORLD_SIZE)
      unset "$var"
      ;;
  esac
done < <(compgen -e)

tmp="$(mktemp -d "${TMPDIR:-/tmp}/bertlab-slurm.XXXXXX")"
cluster="$tmp/cluster"
started=0
cleanup() {
  local status=$?
  if ((started)); then
    bash "$here/cluster.sh" stop "$cluster" || status=1
  fi
  rm -rf "$tmp"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Seconds since $1 (an $EPOCHREALTIME), with one decimal.
elapsed() {
  awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# Prints the message, the tails of the files given after it and of the cluster's logs; exits 1.
fail() {
  local message="$1" f
  shift
  echo "FAILED: $message" >&2
  for f in "$@" "$cluster"/log/slurmctld.log "$cluster"/log/slurmd.log; do
    [[ -f "$f" ]] || continue
    echo "----- $f (last 60 lines) -----" >&2
    tail -n 60 "$f" >&2
  done
  exit 1
}

echo "== starting a one-node Slurm in $cluster"
t0="$EPOCHREALTIME"
started=1
bash "$here/cluster.sh" start "$cluster" || fail "the test cluster did not start"
# shellcheck source=/dev/null  # written by cluster.sh start
source "$cluster/env"
echo "cluster start: $(elapsed "$t0") s"
cd "$tmp"

# --- a. srun -n 2 bertlab gradcheck ---------------------------------------------------------
out="$tmp/out"
log_a="$tmp/srun-gradcheck.log"
echo "== a. srun -n 2 bertlab gradcheck (variants single, mirrored-env-2, sparse-allgather-env-2)"
t0="$EPOCHREALTIME"
rc=0
env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE -u LOCAL_RANK \
  timeout 300 srun -n 2 --time=5 --kill-on-bad-exit=1 --job-name=bertlab-gradcheck \
  "$exe" gradcheck "$toml" --variant single --variant mirrored-env-2 \
  --variant sparse-allgather-env-2 --output-dir "$out" >"$log_a" 2>&1 || rc=$?
cat "$log_a"
echo "srun gradcheck: $(elapsed "$t0") s"
((rc == 0)) || fail "srun -n 2 bertlab gradcheck exited with $rc" "$log_a"
if grep -q "FAIL" "$log_a"; then
  fail "the gradcheck table has a FAIL row" "$log_a"
fi
json="$out/$experiment/gradcheck.json"
[[ -f "$json" ]] || fail "srun gradcheck wrote no $json" "$log_a"
python3 - "$json" <<'EOF' || fail "gradcheck.json: not every variant matches" "$log_a" "$json"
import json, sys
path = sys.argv[1]
variants = json.load(open(path))["variants"]
want = {"single", "mirrored-env-2", "sparse-allgather-env-2"}
problems = []
if set(variants) != want:
    problems.append(f"variants are {sorted(variants)}, expected {sorted(want)}")
for name, v in variants.items():
    if v.get("match") is not True:
        problems.append(f"variant {name!r}: match is {v.get('match')!r}")
for p in problems:
    print(f"{path}: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
echo "a. passed: every variant matches the reference"

# --- b. sbatch --array=0-1 --wait: two one-process runs ---------------------------------------
out2="$tmp/out2"
variants=(single single-lr2)
batch="$tmp/array.sh"
{
  echo "#!/usr/bin/env bash"
  echo "# Written by tests/slurm/slurm_test.sh: array task i runs variant i as a plain run."
  echo "set -euo pipefail"
  printf 'exe=%q\ntoml=%q\nout2=%q\ndone_dir=%q\n' "$exe" "$toml" "$out2" "$tmp"
  printf 'variants=(%q %q)\n' "${variants[@]}"
  cat <<'EOF'
variant="${variants[$SLURM_ARRAY_TASK_ID]}"
echo "array task $SLURM_ARRAY_TASK_ID (job $SLURM_JOB_ID, SLURM_PROCID=${SLURM_PROCID:-unset}):" \
  "variant $variant"
"$exe" run "$toml" --variant "$variant" --output-dir "$out2"
echo "exit 0" >"$done_dir/array-$SLURM_ARRAY_TASK_ID.done"
EOF
} >"$batch"
echo "== b. sbatch --array=0-1 --wait (variants ${variants[*]})"
t0="$EPOCHREALTIME"
rc=0
job="$(timeout 300 sbatch --parsable --wait --array=0-1 --time=5 --job-name=bertlab-array \
  --chdir="$tmp" --output="$tmp/array-%a.out" "$batch" 2>"$tmp/sbatch.err")" || rc=$?
echo "sbatch array: $(elapsed "$t0") s"
task_outputs=("$tmp/array-0.out" "$tmp/array-1.out")
((rc == 0)) || fail "sbatch --array=0-1 --wait exited with $rc" "$tmp/sbatch.err" "${task_outputs[@]}"
for f in "${task_outputs[@]}"; do
  echo "----- $f -----"
  cat "$f"
done
job="${job%%;*}"  # --parsable prints JOBID[;CLUSTER]
[[ "$job" =~ ^[0-9]+$ ]] || fail "sbatch printed no job id ('$job')" "$tmp/sbatch.err"

# No accounting (sacct) here: the controller still knows finished jobs for MinJobAge (300 s).
states="$(scontrol -o show job "$job" 2>&1)" || fail "scontrol show job $job failed: $states"
for i in 0 1; do
  line="$(grep -E "ArrayJobId=$job ArrayTaskId=$i " <<<"$states" || true)"
  [[ -n "$line" ]] || fail "scontrol knows no array task ${job}_$i: $states" "${task_outputs[@]}"
  if [[ "$line" != *"JobState=COMPLETED "* || "$line" != *" ExitCode=0:0 "* ]]; then
    fail "array task ${job}_$i did not complete: $(grep -oE 'JobState=[A-Z_]+|ExitCode=[0-9:]+' \
      <<<"$line" | tr '\n' ' ')" "${task_outputs[@]}"
  fi
  [[ -f "$tmp/array-$i.done" ]] || fail "array task ${job}_$i did not finish its script" \
    "${task_outputs[@]}"
  metrics="$out2/$experiment/${variants[$i]}/metrics.jsonl"
  [[ -s "$metrics" ]] || fail "array task ${job}_$i wrote no $metrics" "${task_outputs[@]}"
done
# Plain runs: a process rank would have logged its Gloo store ("[comm] rank 0 of N: ...").
if grep -q '^\[comm\]' "${task_outputs[@]}"; then
  fail "an array task ran as a process rank (a [comm] line in its output)" "${task_outputs[@]}"
fi
# Each task ran its own variant: 3 steps, at its own learning rate.
python3 - "$out2/$experiment" <<'EOF' || fail "the array tasks' metrics are not as expected"
import json, sys
problems = []
for variant, lr in (("single", 1e-3), ("single-lr2", 2e-3)):
    path = f"{sys.argv[1]}/{variant}/metrics.jsonl"
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if [r.get("step") for r in rows] != [1, 2, 3]:
        problems.append(f"{path}: steps {[r.get('step') for r in rows]}, expected [1, 2, 3]")
    elif abs(rows[0].get("learning_rate", 0) - lr) > 1e-12:
        problems.append(f"{path}: step 1 learning_rate {rows[0].get('learning_rate')}, "
                        f"expected {lr}")
for p in problems:
    print(p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
echo "b. passed: array tasks ${job}_0 and ${job}_1 COMPLETED with exit code 0, each a plain" \
  "one-process run of its variant (3 steps in metrics.jsonl)"

# --- c. bertlab submit --slurm: a study of 3 variants × 2 seeds ----------------------------------
# single and single-lr2 run in the batch step (one array of 4), mirrored-env-2 as 2 Slurm tasks
# started by srun (an array of 2); then bertlab compare aggregates the seeds.
out3="$tmp/out3"
log_c="$tmp/submit.log"
study=(--variant single --variant single-lr2 --variant mirrored-env-2
  --set experiment.repeats=2 --output-dir "$out3")
echo "== c. bertlab submit --slurm (3 variants × 2 seeds)"
"$exe" submit "$toml" --slurm --dry-run "${study[@]}" >"$tmp/dry.sh" 2>"$tmp/dry.err" ||
  fail "submit --dry-run failed" "$tmp/dry.err"
grep -q -- "--array=0-3" "$tmp/dry.sh" || fail "the dry run has no array of 4" "$tmp/dry.sh"
grep -q "srun -n 2 " "$tmp/dry.sh" || fail "the dry run starts no 2-task run" "$tmp/dry.sh"
grep -q -- "--no-comparison --rerun --resume" "$tmp/dry.sh" ||
  fail "the array tasks do not resume a stopped run" "$tmp/dry.sh"
[[ ! -e "$out3" ]] || fail "submit --dry-run wrote $out3"
t0="$EPOCHREALTIME"
rc=0
timeout 300 "$exe" submit "$toml" --slurm --wait --time 5 "${study[@]}" >"$log_c" 2>&1 || rc=$?
cat "$log_c"
echo "submit --wait: $(elapsed "$t0") s"
task_logs=("$out3/$experiment"/slurm/*.out)
((rc == 0)) || fail "bertlab submit --slurm --wait exited with $rc" "$log_c" "${task_logs[@]}"
[[ "$(grep -c '^Submitted job array' "$log_c")" == 2 ]] || fail "not two arrays" "$log_c"
grep -q "When it is done: .* compare " "$log_c" || fail "no compare line" "$log_c"
rc=0
"$exe" compare "$out3/$experiment" >"$tmp/compare.log" 2>&1 || rc=$?
((rc == 0)) || fail "bertlab compare of the study exited with $rc" "$tmp/compare.log" \
  "${task_logs[@]}"
python3 - "$out3/$experiment/comparison.csv" <<'EOF' || fail "the study's comparison" \
  "$tmp/compare.log" "${task_logs[@]}"
import csv, sys
rows = {r["variant"]: r for r in csv.DictReader(open(sys.argv[1]))}
problems = []
if set(rows) != {"single", "single-lr2", "mirrored-env-2"}:
    problems.append(f"variants {sorted(rows)}")
for name, r in rows.items():
    if r.get("seeds") != "2":
        problems.append(f"{name}: seeds {r.get('seeds')!r}, expected '2'")
    if not r.get("final_loss_mean"):
        problems.append(f"{name}: no final_loss_mean")
for p in problems:
    print(f"{sys.argv[1]}: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
# Submitting again submits nothing: every run finished with the same configuration.
"$exe" submit "$toml" --slurm "${study[@]}" >"$tmp/again.log" 2>&1 ||
  fail "the second submit failed" "$tmp/again.log"
grep -q "nothing to submit" "$tmp/again.log" || fail "the second submit submitted" "$tmp/again.log"
echo "c. passed: bertlab submit ran 6 runs in 2 arrays; bertlab compare aggregated 2 seeds each"

# --- d. bertlab submit --slurm of a study in two stages ------------------------------------------
out4="$tmp/out4"
log_d="$tmp/stages.log"
echo "== d. bertlab submit --slurm (single, then from-single starting from it; 2 seeds)"
t0="$EPOCHREALTIME"
rc=0
timeout 60 "$exe" submit "$toml" --slurm --time 5 --variant single --variant from-single \
  --set experiment.repeats=2 --output-dir "$out4" >"$log_d" 2>&1 || rc=$?
cat "$log_d"
((rc == 0)) || fail "bertlab submit --slurm of two stages exited with $rc" "$log_d"
[[ "$(grep -c '^Submitted job array' "$log_d")" == 2 ]] || fail "not two arrays" "$log_d"
first="$(sed -n 's/^Submitted job array \([0-9]*\) .*/\1/p' "$log_d" | head -1)"
grep -q "^Submitted job array [0-9]* (2 run(s), 1 task(s) each, after $first)" "$log_d" ||
  fail "the second stage's array does not wait for the first ($first)" "$log_d"
# Both arrays leave the queue (no accounting here: squeue, polled).
for _ in $(seq 300); do
  [[ -z "$(squeue -h -n "bertlab-$experiment" 2>/dev/null)" ]] && break
  sleep 1
done
echo "two stages: $(elapsed "$t0") s"
stage_logs=("$out4/$experiment"/slurm/*.out)
python3 - "$out4/$experiment" <<'EOF' || fail "the second stage's runs" "$log_d" "${stage_logs[@]}"
import json, os, sys
root = sys.argv[1]
problems = []
for seed in (7, 8):
    first = os.path.join(root, "single", f"seed-{seed}")
    second = os.path.join(root, "from-single", f"seed-{seed}")
    try:
        a = json.load(open(os.path.join(first, "run_summary.json")))
        b = json.load(open(os.path.join(second, "run_summary.json")))
    except OSError as e:
        problems.append(str(e))
        continue
    want = os.path.join(first, "model.safetensors")
    if b.get("init_checkpoint") != want or b.get("init_from") != f"single seed {seed}":
        problems.append(f"{second}: init_checkpoint {b.get('init_checkpoint')!r}, init_from "
                        f"{b.get('init_from')!r}; expected {want!r}, 'single seed {seed}'")
    if b.get("start_time", 0) < a.get("start_time", 0) + a.get("wall_time_s", 0) - 1:
        problems.append(f"{second} started before {first} ended")
for p in problems:
    print(p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
echo "d. passed: the second stage's array waited for the first; each of its runs started from" \
  "the first stage's run of its seed"
echo "PASSED"
