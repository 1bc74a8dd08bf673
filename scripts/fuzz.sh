#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with AddressSanitizer + UndefinedBehaviorSanitizer
# and runs each for SECONDS_PER_TARGET (default 60): `scripts/fuzz.sh [SECONDS_PER_TARGET]`.
#   FUZZ_TARGETS="squad tokenizer"   run only these
#   BUILD_DIR=build-asan             the sanitized build (shared with test.sh --sanitize=address,undefined)
# A crash, sanitizer report, leak, timeout (10 s per input) or out-of-memory (2 GiB) is a failure;
# its input is copied to tests/fuzz-regressions/<target>/, which the normal suite replays.
# Figures (executions, corpus size, crashes per target) go to $BUILD_DIR/fuzz/summary.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET]  (a whole number of seconds, got '$seconds')" >&2
  exit 2
fi
cd "$root"
bash scripts/setup-deps.sh
export BUILD_DIR=${BUILD_DIR:-build-asan}
source scripts/sanitizers/env.sh address,undefined
bash scripts/build.sh --target bertlab_fuzz_targets
build_dir="$BUILD_DIR"
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac

# Every tests/fuzz/<target>_fuzz.cpp is a target.
targets=${FUZZ_TARGETS:-$(cd tests/fuzz && ls ./*_fuzz.cpp | sed 's|^\./||; s|_fuzz\.cpp$||')}
if [[ -z $targets ]]; then
  echo "[fuzz] no targets found in tests/fuzz" >&2
  exit 1
fi
summary="$build_dir/fuzz/summary.md"
{
  echo "| target | seconds | executions | exec/s | corpus files | crashes |"
  echo "|---|---|---|---|---|---|"
} >"$summary"
failed=()
for t in $targets; do
  exe="$build_dir/fuzz/fuzz_$t"
  corpus="$build_dir/fuzz/corpus/$t"
  artifacts="$build_dir/fuzz/artifacts/$t"
  rm -rf "$artifacts"
  mkdir -p "$corpus" "$artifacts"
  while read -r seed; do
    [[ -n $seed ]] && cp -f "$root/$seed" "$corpus/seed-$(basename "$seed")"
  done <"tests/fuzz/seeds/$t.list"
  regressions="$root/tests/fuzz-regressions/$t"
  extra=()
  [[ -d $regressions ]] && extra=("$regressions")
  log="$build_dir/fuzz/$t.log"
  echo "[fuzz] $t: ${seconds} s"
  set +e
  (cd "$build_dir/fuzz" && "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" "${extra[@]}" >"$log" 2>&1)
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  files=$(find "$corpus" -type f | wc -l)
  crashes=0
  shopt -s nullglob
  for a in "$artifacts"/*; do
    mkdir -p "$regressions"
    cp -f "$a" "$regressions/"
    crashes=$((crashes + 1))
  done
  shopt -u nullglob
  echo "| $t | $seconds | ${runs:-?} | ${rate:-?} | $files | $crashes |" >>"$summary"
  if ((rc != 0 || crashes > 0)); then
    failed+=("$t")
    echo "[fuzz] $t FAILED (exit $rc); the end of $log:" >&2
    tail -40 "$log" >&2
    [[ $crashes -gt 0 ]] && echo "[fuzz] its input is kept in $regressions/; replay: $exe $regressions/<file>" >&2
  else
    echo "[fuzz] $t: ${runs:-?} executions, no crash"
  fi
done
cat "$summary"
if ((${#failed[@]} > 0)); then
  echo "[fuzz] failed: ${failed[*]}" >&2
  exit 1
fi
echo "[fuzz] every target ran ${seconds} s without a crash"
