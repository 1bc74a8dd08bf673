#!/usr/bin/env bash
# Two hosts for real: two network namespaces joined by a veth pair (198.18.0.1/24 and
# 198.18.0.2/24, the benchmarking range; no other address is contacted), each rank started in
# its host with torchrun's variables set by hand (MASTER_ADDR = the first host's address), as a
# user of torchrun or of a cluster scheduler does on two machines.
#   1. gradcheck, 1 rank per host (world 2): mirrored and sparse_allgather match single.
#   2. gradcheck, 2 ranks per host (world 4): the same.
#   3. the second host's rank is killed mid-training: the first fails within timeout_s + 10 s,
#      naming rank 1.
#   4. the second host's rank binds Gloo to loopback (GLOO_SOCKET_IFNAME=lo), so its peer cannot
#      reach it: both fail within their timeout, saying what to check.
#   5. the second host's rank is given a port nobody serves: it fails naming the address and the
#      port, and rank 0 fails naming it.
# Usage: two_hosts_test.sh BERTLAB_EXECUTABLE. Needs root (ip netns); exits 77 (skipped) without.
set -euo pipefail
exe=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
experiment=$root/tests/data/experiments/two_hosts.toml

if [[ $(id -u) -ne 0 ]]; then
  echo "skipped: network namespaces need root (CI runs as root)"
  exit 77
fi
if ! command -v ip >/dev/null; then
  echo "skipped: 'ip' (iproute2) is missing; scripts/setup-deps.sh installs it"
  exit 77
fi

# Names of this run's own (a second run of the suite on the machine gets others).
host0=bertlab-h0-$$
host1=bertlab-h1-$$
link0=blh0$$
link1=blh1$$
addr0=198.18.0.1
addr1=198.18.0.2
work=$(mktemp -d)

cleanup() {
  local ns
  for ns in "$host0" "$host1"; do
    if ip netns list | grep -qw "$ns"; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$ns" || true
    fi
  done
  ip link del "$link0" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  local log
  for log in "$work"/*.log; do
    [[ -f $log ]] || continue
    echo "--- $(basename "$log") (last 30 lines)" >&2
    tail -n 30 "$log" >&2
  done
  exit 1
}

ip netns add "$host0"
ip netns add "$host1"
ip link add "$link0" type veth peer name "$link1"
ip link set "$link0" netns "$host0"
ip link set "$link1" netns "$host1"
ip -n "$host0" addr add "$addr0/24" dev "$link0"
ip -n "$host1" addr add "$addr1/24" dev "$link1"
for ns in "$host0" "$host1"; do
  ip -n "$ns" link set lo up
done
ip -n "$host0" link set "$link0" up
ip -n "$host1" link set "$link1" up
echo "hosts: $host0 ($addr0, $link0) and $host1 ($addr1, $link1)"

# start_rank HOST RANK WORLD LOCAL_RANK LOCAL_WORLD LOG [VAR=VALUE ...] -- ARGS...: one rank in
# HOST's namespace, in the background, with torchrun's variables; its pid in $last_pid.
start_rank() {
  local ns=$1 rank=$2 world=$3 local_rank=$4 local_world=$5 log=$6
  shift 6
  local vars=()
  while [[ $1 != -- ]]; do
    vars+=("$1")
    shift
  done
  shift
  ip netns exec "$ns" env -u SLURM_PROCID -u GLOO_SOCKET_IFNAME RANK="$rank" \
    WORLD_SIZE="$world" LOCAL_RANK="$local_rank" LOCAL_WORLD_SIZE="$local_world" \
    MASTER_ADDR="$addr0" MASTER_PORT=29500 "${vars[@]}" "$exe" "$@" >"$log" 2>&1 &
  last_pid=$!
}

# gradcheck_world WORLD: WORLD/2 ranks per host run gradcheck of the WORLD-rank variants.
gradcheck_world() {
  local world=$1 per_host=$(($1 / 2)) rank pids=() out=$work/out-$1
  local args=(gradcheck "$experiment" --variant single --variant "mirrored-$world"
    --variant "sparse-allgather-$world" --output-dir "$out")
  for ((rank = 0; rank < world; ++rank)); do
    local ns=$host0
    ((rank >= per_host)) && ns=$host1
    start_rank "$ns" "$rank" "$world" $((rank % per_host)) "$per_host" \
      "$work/world$world-rank$rank.log" -- "${args[@]}"
    pids+=("$last_pid")
  done
  for ((rank = 0; rank < world; ++rank)); do
    wait "${pids[$rank]}" || fail "world $world: rank $rank exited with $?"
  done
  local log0=$work/world$world-rank0.log
  grep -q "Gloo bound to $addr0 (interface $link0; the route to MASTER_ADDR $addr0)" "$log0" ||
    fail "world $world: rank 0 does not log the address it bound"
  grep -q "rank $((world - 1)) of $world: Gloo over TCP store $addr0:29500.*Gloo bound to $addr1 (interface $link1" \
    "$work/world$world-rank$((world - 1)).log" ||
    fail "world $world: the last rank does not log that it bound $addr1 on $link1"
  if grep -q FAIL "$log0"; then fail "world $world: gradcheck printed FAIL"; fi
  python3 - "$out/two-hosts/gradcheck.json" "$world" <<'EOF' || fail "world $world: gradcheck.json"
import json, sys
variants = json.load(open(sys.argv[1]))["variants"]
world = sys.argv[2]
for name in (f"mirrored-{world}", f"sparse-allgather-{world}"):
    assert variants[name]["match"] is True, (name, variants[name])
print("gradcheck.json:", ", ".join(f"{n} match" for n in variants if n != "single"))
EOF
}

seconds() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

t=$(seconds)
gradcheck_world 2
echo "1. two hosts x 1 rank: gradcheck PASS ($(elapsed "$t" "$(seconds)") s)"

t=$(seconds)
gradcheck_world 4
echo "2. two hosts x 2 ranks: gradcheck PASS ($(elapsed "$t" "$(seconds)") s)"

# 3. Rank 1 (second host) is killed once rank 0 has logged 5 steps.
t=$(seconds)
timeout_s=20
out=$work/out-kill
run_args=(run "$experiment" --variant mirrored-2 --output-dir "$out"
  --set train.num_train_steps=100000 --set "strategy.timeout_s=$timeout_s")
start_rank "$host0" 0 2 0 1 "$work/kill-rank0.log" -- "${run_args[@]}"
pid0=$last_pid
start_rank "$host1" 1 2 0 1 "$work/kill-rank1.log" -- "${run_args[@]}"
pid1=$last_pid
partial=$out/two-hosts/mirrored-2/metrics.jsonl.partial
for _ in $(seq 1 1200); do
  [[ -f $partial && $(wc -l <"$partial") -ge 5 ]] && break
  kill -0 "$pid0" 2>/dev/null || fail "kill: rank 0 ended before 5 steps"
  sleep 0.05
done
[[ -f $partial && $(wc -l <"$partial") -ge 5 ]] || fail "kill: rank 0 did not log 5 steps in 60 s"
# The bertlab process of rank 1 (the child of ip netns exec, or the process itself).
victim=$(pgrep -P "$pid1" -f "$exe" || echo "$pid1")
kill -9 $victim
killed=$(seconds)
status=0
wait "$pid0" || status=$?
ended=$(seconds)
wait "$pid1" 2>/dev/null || true
waited=$(elapsed "$killed" "$ended")
((status != 0)) || fail "kill: rank 0 exited 0 after its peer was killed"
grep -q "rank 1 stopped" "$work/kill-rank0.log" || fail "kill: rank 0 does not name rank 1"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) + 10 else 1)" \
  "$waited" "$timeout_s" || fail "kill: rank 0 took $waited s (timeout_s $timeout_s + 10)"
echo "3. rank 1 killed: rank 0 exited $status after $waited s: $(grep -o 'error: .*' "$work/kill-rank0.log" | cut -c1-200)"
echo "   ($(elapsed "$t" "$(seconds)") s)"

# 4. Rank 1 binds Gloo to its loopback: rank 0 cannot reach it, and it waits for rank 0.
t=$(seconds)
timeout_s=10
gloo_args=(run "$experiment" --variant mirrored-2 --output-dir "$work/out-lo"
  --set "strategy.timeout_s=$timeout_s")
start_rank "$host0" 0 2 0 1 "$work/lo-rank0.log" -- "${gloo_args[@]}"
pid0=$last_pid
start_rank "$host1" 1 2 0 1 "$work/lo-rank1.log" GLOO_SOCKET_IFNAME=lo -- "${gloo_args[@]}"
pid1=$last_pid
s0=0
s1=0
wait "$pid0" || s0=$?
t0=$(elapsed "$t" "$(seconds)")
wait "$pid1" || s1=$?
waited=$(elapsed "$t" "$(seconds)")
echo "   rank 0 ended after $t0 s, rank 1 after $waited s"
((s0 != 0 && s1 != 0)) || fail "unreachable peer: exit codes $s0 and $s1"
for r in 0 1; do
  grep -q "\[comm\] rank $r of 2: joining the gloo group failed: .*set GLOO_SOCKET_IFNAME" \
    "$work/lo-rank$r.log" || fail "unreachable peer: rank $r does not say what to check"
  if grep -q "frame #" "$work/lo-rank$r.log"; then fail "rank $r printed a C++ stack trace"; fi
done
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) + 10 + 15 else 1)" \
  "$waited" "$timeout_s" || fail "unreachable peer: the ranks took $waited s"
echo "4. unreachable peer: both ranks failed in $waited s; rank 0: $(grep -o 'error: .*' "$work/lo-rank0.log" | cut -c1-400)"

# 5. Rank 1 is given a port where nothing listens: the rendezvous fails on both ranks.
t=$(seconds)
start_rank "$host0" 0 2 0 1 "$work/port-rank0.log" -- "${gloo_args[@]}"
pid0=$last_pid
start_rank "$host1" 1 2 0 1 "$work/port-rank1.log" MASTER_PORT=29999 -- "${gloo_args[@]}"
pid1=$last_pid
s0=0
s1=0
wait "$pid0" || s0=$?
wait "$pid1" || s1=$?
waited=$(elapsed "$t" "$(seconds)")
((s0 != 0 && s1 != 0)) || fail "unreachable store: exit codes $s0 and $s1"
grep -q "rank 1 of 2: the rendezvous at $addr0:29999 failed within $timeout_s s.*reaches $addr0 on TCP port 29999" \
  "$work/port-rank1.log" || fail "unreachable store: rank 1 does not name the address and port"
grep -q "rank 0 of 2: rank 1 did not publish its config in the store within ${timeout_s}000 ms" \
  "$work/port-rank0.log" || fail "unreachable store: rank 0 does not name rank 1"
for r in 0 1; do
  if grep -q "frame #" "$work/port-rank$r.log"; then fail "rank $r printed a C++ stack trace"; fi
done
echo "5. unreachable store: both ranks failed in $waited s; rank 1: $(grep -o 'error: .*' "$work/port-rank1.log" | cut -c1-400)"
echo "two hosts: all passed"
