#!/bin/bash
# The service at scale on one machine (issue 35, section 4): 4 network-namespace hosts
# (tests/netns_testing.sh), 8 ps (2 a host) and N workers spread over the hosts, for each N of
# SCALE_WORKERS (default "4 8 16 32"), running a small MLP in SYNC and in ASYNC, each job traced
# (JobSpec.trace). For each N and mode it prints a row, read from trace.json (the workers' first
# pull to their last push) and /proc: the updates each shard applied per second (SYNC: one a step
# of the job; ASYNC: one a worker's step), the examples trained per second, a worker's mean step
# and its parts (compute; pull and push, each with its waits at the shards; those waits alone:
# SYNC's barrier), and the CPU time per update of the 8 ps together and of the workers together
# (the machine's whole CPU, with psctl's little). The rows go to
# scale.csv in the test's outputs. docs/SCALING.md models step time from them.
#
# Checks: every job ends DONE with SCALE_STEPS (default 100) steps on every worker, and its
# trace holds every worker's steps. Manual (tagged so): 40 daemons and 8 jobs take minutes on
# this machine, more than CI's time allows; run it with `bazel test //tests:scale_test`.
#
# Needs root (network namespaces); elsewhere it says why and skips (exit 0). Traffic goes only
# to 10.77.N.x and loopback.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"
# shellcheck source=tests/netns_testing.sh
source "$PWD/tests/netns_testing.sh"

readonly TAG="sc$$"
readonly DIR="${TEST_TMPDIR:-/tmp}/scale-$$"
readonly WORKER_COUNTS="${SCALE_WORKERS:-4 8 16 32}"
readonly STEPS="${SCALE_STEPS:-100}"
readonly NUM_PS=8
readonly HOSTS=4
DAEMON_PIDS=()
PS_PIDS=()
WORKER_PIDS=()
LOG_FILES=("$DIR/*.log")
LOG_LINES=20

cleanup() {
  stop_pids 10 "${DAEMON_PIDS[@]}"
  netns_cleanup
  keep_outputs "$DIR"/scale.csv
  rm -rf "$DIR"
}
on_exit cleanup

mkdir -p "$DIR"
netns_setup "$TAG" "$HOSTS"

# Task `index` of a job lives on host (index % 4) + 1, port `base` + index / 4.
address() {  # INDEX BASE
  echo "$NET.$((11 + $1 % HOSTS)):$(($2 + $1 / HOSTS))"
}

start_cluster() {  # WORKERS: writes $DIR/cluster.json, starts every daemon, waits for them.
  local workers=$1 i ps_list="" worker_list=""
  for i in $(seq 0 $((NUM_PS - 1))); do ps_list+="${ps_list:+, }\"$(address "$i" 2222)\""; done
  for i in $(seq 0 $((workers - 1))); do
    worker_list+="${worker_list:+, }\"$(address "$i" 2300)\""
  done
  echo "{\"cluster\": {\"ps\": [$ps_list], \"worker\": [$worker_list]}}" > "$DIR/cluster.json"
  rm -f "$DIR"/*.port
  DAEMON_PIDS=()
  PS_PIDS=()
  WORKER_PIDS=()
  for i in $(seq 0 $((NUM_PS - 1))); do
    local host=$((1 + i % HOSTS))
    ip netns exec "${TAG}h$host" "$PS_SERVER" --cluster_spec="$DIR/cluster.json" --task="ps:$i" \
      --bind_host="$NET.$((10 + host))" --port_file="$DIR/ps-$i.port" --insecure \
      > "$DIR/ps-$i.log" 2>&1 &
    DAEMON_PIDS+=($!)
    PS_PIDS+=($!)
  done
  for i in $(seq 0 $((workers - 1))); do
    local host=$((1 + i % HOSTS))
    ip netns exec "${TAG}h$host" "$PS_WORKER" --cluster_spec="$DIR/cluster.json" \
      --task="worker:$i" --bind_host="$NET.$((10 + host))" --port_file="$DIR/worker-$i.port" \
      --device=cpu --insecure > "$DIR/worker-$i.log" 2>&1 &
    DAEMON_PIDS+=($!)
    WORKER_PIDS+=($!)
  done
  for name in $(seq -f "ps-%g" 0 $((NUM_PS - 1))) $(seq -f "worker-%g" 0 $((workers - 1))); do
    wait_until 60 test -s "$DIR/$name.port" || fail "$name did not start listening within 60 s"
  done
}

stop_cluster() {
  stop_pids 10 "${DAEMON_PIDS[@]}"
  DAEMON_PIDS=()
}

# The CPU time so far of the processes PIDS..., in clock ticks (utime + stime of each).
cpu_ticks() {
  local total=0 pid fields
  for pid in "$@"; do
    read -r -a fields < <(sed 's/^.*) //' "/proc/$pid/stat")
    total=$((total + fields[11] + fields[12]))
  done
  echo "$total"
}

write_job() {  # MODE FILE
  cat > "$2" <<EOF
{"job_id": "scale-$1",
 "model": {"kind": "MLP", "hidden_sizes": [32]},
 "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 20000, "feature_dim": 16,
                        "num_classes": 4},
          "test_fraction": 0.1},
 "learning_rate": {"base": 0.05},
 "consistency": {"mode": "$1"},
 "batch_size": 32, "steps": $STEPS, "eval_interval": 0, "seed": 3, "min_slice_bytes": 64,
 "time_limit_s": 900, "trace": true}
EOF
}

echo "workers,mode,updates_per_second,examples_per_second,step_ms,compute_ms,pull_ms,push_ms,wait_ms,ps_cpu_ms_per_update,worker_cpu_ms_per_update" \
  > "$DIR/scale.csv"
ticks_per_second=$(getconf CLK_TCK)
for workers in $WORKER_COUNTS; do
  start_cluster "$workers"
  log "$workers workers and $NUM_PS ps up on $HOSTS hosts"
  for mode in SYNC ASYNC; do
    results="$DIR/results-$workers-$mode"
    write_job "$mode" "$DIR/job-$mode.json"
    ps_before=$(cpu_ticks "${PS_PIDS[@]}")
    workers_before=$(cpu_ticks "${WORKER_PIDS[@]}")
    timeout 900 "$PSCTL" submit --cluster_spec="$DIR/cluster.json" --job="$DIR/job-$mode.json" \
      --results="$results" > "$DIR/submit-$workers-$mode.log" 2>&1 ||
      fail "psctl submit ($workers workers, $mode) exited $?: $(tail -5 "$DIR/submit-$workers-$mode.log")"
    ps_ticks=$(($(cpu_ticks "${PS_PIDS[@]}") - ps_before))
    worker_ticks=$(($(cpu_ticks "${WORKER_PIDS[@]}") - workers_before))
    row=$(python3 - "$results" "$workers" "$mode" "$STEPS" "$ps_ticks" "$worker_ticks" \
                    "$ticks_per_second" <<'PYEOF'
import json, sys
results, workers, mode, steps, ticks, worker_ticks, hz = sys.argv[1], int(sys.argv[2]), \
    sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
summary = json.load(open(results + "/summary.json"))
if summary.get("state") != "DONE":
    sys.exit("the job ended " + str(summary.get("state")) + ": " + str(summary.get("error")))
trace = json.load(open(results + "/trace.json"))
names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
         if e["ph"] == "M" and e["name"] == "process_name"}
parts = {}  # (worker pid, kind) -> [durations in us]
first, last = None, None  # The workers' first pull's start and last push's end, in us.
for e in trace["traceEvents"]:
    if e["ph"] == "X" and e["cat"] == "worker":
        parts.setdefault((e["pid"], e["name"]), []).append(e["dur"])
        if e["name"] == "pull":
            first = e["ts"] if first is None else min(first, e["ts"])
        if e["name"] == "push":
            last = e["ts"] + e["dur"] if last is None else max(last, e["ts"] + e["dur"])
worker_pids = [pid for pid, name in names.items() if name.startswith("worker:")]
if len(worker_pids) != workers:
    sys.exit("the trace has %d workers, not %d" % (len(worker_pids), workers))
for pid in worker_pids:
    if len(parts.get((pid, "pull"), [])) != steps:
        sys.exit("%s traced %d pulls, not %d" % (names[pid], len(parts.get((pid, "pull"), [])), steps))
def mean_ms(kind):  # A worker's mean per step, over every worker.
    return sum(sum(parts.get((pid, kind), [])) for pid in worker_pids) / 1000.0 / (steps * workers)
wait = mean_ms("wait")
step = mean_ms("pull") + mean_ms("compute") + mean_ms("push") + mean_ms("straggle")
updates = steps if mode == "SYNC" else steps * workers  # On each shard.
seconds = (last - first) / 1e6
batch = json.load(open(results + "/job.json"))["spec"]["batch_size"]
print("%d,%s,%.1f,%.0f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f" % (
    workers, mode, updates / seconds, steps * workers * batch / seconds, step,
    mean_ms("compute"), mean_ms("pull"), mean_ms("push"), wait, 1000.0 * ticks / hz / updates,
    1000.0 * worker_ticks / hz / updates))
PYEOF
    ) || fail "$workers workers, $mode: $row"
    echo "$row" >> "$DIR/scale.csv"
    log "$row"
  done
  stop_cluster
done
column -s, -t < "$DIR/scale.csv"
log "PASSED"
