#!/usr/bin/env bash
# A real one-node Slurm cluster in a folder, for tests.
#
#   cluster.sh start DIR   start munged, slurmctld and slurmd for this machine's node
#                          (NodeName=$(hostname -s), CPUs=2), with the slurm.conf, munge key,
#                          munge socket, state, spool, logs and pid files all inside DIR; wait
#                          until `sinfo` shows the node idle; write DIR/env (export SLURM_CONF=...)
#                          for callers to source.
#   cluster.sh stop DIR    cancel the cluster's jobs, then stop exactly the daemons that
#                          `start DIR` started (slurmd, slurmctld, then munged) and wait for them.
#
# Nothing under /etc is read or written: Slurm finds its configuration through SLURM_CONF, munged
# gets its paths as options. The controller and node ports are picked free at start, so that two
# clusters on one machine do not collide. Needs root (SlurmUser=root) and Debian's slurm-wlm and
# munge packages (scripts/setup-deps.sh). Environment: CLUSTER_START_TIMEOUT_S (default 60).
set -euo pipefail

usage() {
  echo "usage: $0 start DIR | stop DIR" >&2
  exit 2
}

log() { echo "cluster.sh: $*" >&2; }

# Prints a TCP port on 127.0.0.1 that nothing has bound, from 20000-29999 (below Linux's
# ephemeral range, so that outgoing connections do not take it later), other than $1.
free_port() {
  local not="${1:-0}"
  python3 - "$not" <<'EOF'
import random, socket, sys
not_this = int(sys.argv[1])
for _ in range(200):
    port = random.randint(20000, 29999)
    if port == not_this:
        continue
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit("no free port found in 20000-29999")
EOF
}

# The tail of every log in DIR, for a failure message.
print_logs() {
  local dir="$1" f
  for f in "$dir"/log/*; do
    [[ -f "$f" ]] || continue
    echo "----- $f (last 40 lines) -----" >&2
    tail -n 40 "$f" >&2 || true
  done
}

# True while pid $1 runs the program named $2 (so that a reused pid is never killed); a zombie
# (ended, not yet reaped by its new parent) does not count.
runs() {
  local pid="$1" name="$2" comm stat
  comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
  [[ "$comm" == "$name"* ]] || return 1
  stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat:0:1}" != "Z" ]]
}

# Sends SIGTERM to pid $1 (program $2) and waits up to 20 s for it to end, then SIGKILL.
stop_pid() {
  local pid="$1" name="$2" i
  runs "$pid" "$name" || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 200; i++)); do
    runs "$pid" "$name" || return 0
    sleep 0.1
  done
  log "$name (pid $pid) did not stop on SIGTERM within 20 s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    runs "$pid" "$name" || return 0
    sleep 0.1
  done
  log "error: $name (pid $pid) is still running"
  return 1
}

start() {
  local dir="$1"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if [[ -e "$dir/pids" ]]; then
    log "error: $dir/pids exists: a cluster may be running there; run '$0 stop $dir' first"
    exit 1
  fi
  local node ctld_port slurmd_port timeout_s="${CLUSTER_START_TIMEOUT_S:-60}"
  node="$(hostname -s)"
  ctld_port="$(free_port)"
  slurmd_port="$(free_port "$ctld_port")"
  local first_job_id=$((1000 + RANDOM % 8000))
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log" "$dir/run"
  chmod 0700 "$dir/munge"
  : >"$dir/pids"

  # munged: a fresh 1024-byte key, readable by its owner only.
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 0400 "$dir/munge/munge.key"
  local socket="$dir/munge/munge.socket"
  munged --foreground --force --key-file="$dir/munge/munge.key" --socket="$socket" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" </dev/null >"$dir/log/munged.stdout" 2>&1 &
  echo "munged $!" >>"$dir/pids"
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -S "$socket" ]] && break
    sleep 0.1
  done
  if ! munge -S "$socket" -n </dev/null | unmunge -S "$socket" >/dev/null 2>&1; then
    log "error: munged did not start (munge -n | unmunge failed on $socket)"
    print_logs "$dir"
    stop "$dir"
    exit 1
  fi

  cat >"$dir/slurm.conf" <<EOF
# Written by tests/slurm/cluster.sh: a one-node cluster that lives in $dir.
ClusterName=bertlab-test
SlurmctldHost=$node
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
# A first job id of its own: programs that derive a port from SLURM_JOB_ID (bertlab: 15000 + its
# last four digits) then differ between two clusters on the machine.
FirstJobId=$first_job_id
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$node CPUs=2 RealMemory=20000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  export SLURM_CONF="$dir/slurm.conf"
  echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env"

  slurmctld -D </dev/null >"$dir/log/slurmctld.stdout" 2>&1 &
  echo "slurmctld $!" >>"$dir/pids"
  slurmd -D </dev/null >"$dir/log/slurmd.stdout" 2>&1 &
  echo "slurmd $!" >>"$dir/pids"

  local state="" deadline=$((SECONDS + timeout_s))
  while ((SECONDS < deadline)); do
    state="$(sinfo -h -n "$node" -o %t 2>/dev/null || true)"
    [[ "$state" == "idle" ]] && break
    local name pid
    while read -r name pid; do
      if ! runs "$pid" "$name"; then
        log "error: $name (pid $pid) exited during start"
        print_logs "$dir"
        stop "$dir"
        exit 1
      fi
    done <"$dir/pids"
    sleep 0.5
  done
  if [[ "$state" != "idle" ]]; then
    log "error: node $node is not idle after ${timeout_s} s (sinfo state: '${state:-none}')"
    print_logs "$dir"
    stop "$dir"
    exit 1
  fi
  log "node $node idle (slurmctld port $ctld_port, slurmd port $slurmd_port); source $dir/env"
}

stop() {
  local dir="$1"
  dir="$(cd "$dir" && pwd)"
  [[ -f "$dir/pids" ]] || return 0
  local name pid
  declare -A pids=()
  while read -r name pid; do
    pids[$name]="$pid"
  done <"$dir/pids"

  # Cancel what is still queued or running, while the controller is up.
  if [[ -n "${pids[slurmctld]:-}" ]] && runs "${pids[slurmctld]}" slurmctld; then
    export SLURM_CONF="$dir/slurm.conf"
    local jobs i
    jobs="$(squeue -h -o %A 2>/dev/null || true)"
    if [[ -n "$jobs" ]]; then
      log "cancelling jobs still in the queue: $(echo "$jobs" | tr '\n' ' ')"
      # shellcheck disable=SC2086  # one job id per word
      scancel $jobs 2>/dev/null || true
      for ((i = 0; i < 100; i++)); do
        [[ -z "$(squeue -h -o %A 2>/dev/null || true)" ]] && break
        sleep 0.1
      done
    fi
  fi

  local status=0
  for name in slurmd slurmctld; do
    [[ -n "${pids[$name]:-}" ]] || continue
    stop_pid "${pids[$name]}" "$name" || status=1
  done
  # Step daemons (and their tasks) that slurmd of this cluster left behind: they carry its
  # SLURM_CONF in their environment.
  local p
  for p in /proc/[0-9]*; do
    runs "${p#/proc/}" slurmstepd || continue
    if tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf"; then
      log "stopping a leftover slurmstepd (pid ${p#/proc/})"
      stop_pid "${p#/proc/}" slurmstepd || status=1
    fi
  done
  if [[ -n "${pids[munged]:-}" ]]; then
    stop_pid "${pids[munged]}" munged || status=1
  fi
  if ((status == 0)); then
    rm -f "$dir/pids"
  else
    log "error: some daemons of $dir did not stop (pids in $dir/pids)"
  fi
  return "$status"
}

[[ $# -eq 2 ]] || usage
case "$1" in
  start) start "$2" ;;
  stop) stop "$2" ;;
  *) usage ;;
esac
