#!/usr/bin/env bash
# A chaos run (issue 14): 2 ps and 3 worker daemons on this machine, one job with a checkpoint
# every 2 s, and KILLS `kill -9`s of a task drawn at random (seeded), each started again after
# 0 to 2 s. Prints the job's end (state, steps, final accuracy, events) and, for each ps that
# was killed, the time from its restart to the job's recovery and the steps done again.
# Exit 0 when the job finished DONE; every process it started is stopped at the end.
#
#   tools/chaos.sh [MODE=SYNC|ASYNC] [KILLS=20] [SEED=1] [DIR=/tmp/ps-chaos]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-SYNC}
kills=${2:-20}
seed=${3:-1}
dir=${4:-/tmp/ps-chaos}
bazel build //server:ps_server //worker:ps_worker //ctl:psctl >/dev/null 2>&1
bin=$(bazel info bazel-bin 2>/dev/null)
rm -rf "$dir" && mkdir -p "$dir"
python3 - "$dir" "$mode" "$kills" <<'PY'
import json, socket, sys
dir, mode, kills = sys.argv[1], sys.argv[2], int(sys.argv[3])
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
ports = [s.getsockname()[1] for s in socks]
for s in socks: s.close()
addr = ["127.0.0.1:%d" % p for p in ports]
json.dump({"cluster": {"ps": addr[:2], "worker": addr[2:]}}, open(dir + "/cluster.json", "w"))
json.dump({"job_id": "chaos", "model": {"kind": "SOFTMAX_REGRESSION"},
           "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 6000,
                                  "feature_dim": 16, "num_classes": 4}, "test_fraction": 0.2},
           "learning_rate": {"base": 0.2}, "consistency": {"mode": mode}, "batch_size": 32,
           "steps": 1500 * max(kills, 4), "eval_interval": 1000, "seed": 7,
           "min_slice_bytes": 64, "worker_lease_s": 5, "checkpoint": {"every_seconds": 2},
           "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 2}},
          open(dir + "/job.json", "w"))
PY
declare -A pid
start() {  # TASK
  local kind=${1%%:*} index=${1##*:}
  if [[ $kind == ps ]]; then
    "$bin/server/ps_server" --cluster_spec="$dir/cluster.json" --task="$1" \
      --checkpoint_dir="$dir/checkpoints-$index" >>"$dir/$kind-$index.log" 2>&1 &
  else
    "$bin/worker/ps_worker" --cluster_spec="$dir/cluster.json" --task="$1" --device=cpu \
      >>"$dir/$kind-$index.log" 2>&1 &
  fi
  pid[$1]=$!
}
stop_all() { for task in "${!pid[@]}"; do kill "${pid[$task]}" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop_all EXIT
tasks=(ps:0 ps:1 worker:0 worker:1 worker:2)
for task in "${tasks[@]}"; do start "$task"; done
sleep 1
date +%s.%N >"$dir/started"
"$bin/ctl/psctl" submit --cluster_spec="$dir/cluster.json" --job="$dir/job.json" \
  --results="$dir/results" >"$dir/psctl.out" 2>&1 &
psctl=$!
RANDOM=$seed
for ((k = 1; k <= kills; k++)); do
  sleep $((3 + RANDOM % 3))
  kill -0 $psctl 2>/dev/null || break
  task=${tasks[$((RANDOM % 5))]}
  kill -9 "${pid[$task]}"
  wait "${pid[$task]}" 2>/dev/null || true
  sleep "$((RANDOM % 2)).$((RANDOM % 10))"
  echo "$(date +%s.%N) $task" >>"$dir/restarts"
  start "$task"
done
status=0
wait $psctl || status=$?
python3 - "$dir" "$status" <<'PY'
import csv, json, sys
dir, status = sys.argv[1], int(sys.argv[2])
started = float(open(dir + "/started").read())
restarts = [l.split() for l in open(dir + "/restarts")] if __import__("os").path.exists(dir + "/restarts") else []
summary = json.load(open(dir + "/results/summary.json"))
events = list(csv.DictReader(open(dir + "/results/events.csv")))
print("psctl exit %d; state %s, steps %d, final test accuracy %s" % (
    status, summary["state"], summary["steps"], summary.get("final_eval_accuracy")))
print("kills: %d (%s)" % (len(restarts), ", ".join(t for _, t in restarts)))
for name in ("worker_lost", "worker_rejoined", "recovering", "recovered", "checkpoint_complete"):
    print("  %-20s %d" % (name, sum(e["event"] == name for e in events)))
recovering = [e for e in events if e["event"] == "recovering"]
recovered = [e for e in events if e["event"] == "recovered"]
for ps_restart in (r for r in restarts if r[1].startswith("ps:")):
    at = float(ps_restart[0]) - started
    after = [float(e["time_s"]) for e in recovered if float(e["time_s"]) >= at - 0.5]
    lost = [e for e in recovering if float(e["time_s"]) <= (after[0] if after else 1e9)]
    if after and lost:
        step = int(lost[-1]["detail"].rsplit(" at step ", 1)[1])
        resumed = int(recovered[[float(e["time_s"]) for e in recovered].index(after[0])]["detail"]
                      .split(" at step ")[1].split()[0])
        print("  %s restarted at %.1fs: recovered %.2fs later, %d steps done again" % (
            ps_restart[1], at, after[0] - at, step - resumed))
sys.exit(0 if summary["state"] == "DONE" else 1)
PY
