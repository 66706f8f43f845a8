#!/usr/bin/env bash
# What handing the data out costs (docs/data_handout.md): the README's default job
# (config/jobs/default.json: MLP, SYNC, 2 ps + 2 workers on this machine, `psctl local`) with
# 4000 steps a worker, no evaluations and no checkpoints, alternately with "sharding"
# BY_WORKER and DYNAMIC, ROUNDS times each; prints each run's steps/s (steps over
# summary.json's wall_time_s) and the ratio of the medians. Results: bench/RESULTS.md.
#
#   bazel build -c opt //ctl:psctl //server:ps_server //worker:ps_worker
#   bench/handout_cost.sh [ROUNDS=3] [MODE=SYNC]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
mode=${2:-SYNC}
psctl=bazel-out/k8-opt/bin/ctl/psctl
[[ -x $psctl ]] || {
  echo "build it first: bazel build -c opt //ctl:psctl //server:ps_server //worker:ps_worker" >&2
  exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The default job as `sharding` ($1) says, written to $work/$1.json.
write_job() {
  python3 - "$1" "$mode" "$work/$1.json" <<'PY'
import json, sys
sharding, mode, path = sys.argv[1:]
job = json.load(open("config/jobs/default.json"))
job.update({"job_id": "handout-" + sharding.lower(), "steps": 4000, "eval_interval": 0,
            "checkpoint": {}})
job["consistency"]["mode"] = mode
job["data"]["sharding"] = sharding
json.dump(job, open(path, "w"))
PY
}

# steps/s of one run of sharding $1.
run() {
  "$psctl" local --job="$work/$1.json" --ps=2 --workers=2 --results="$work/results-$1" \
    --overwrite >"$work/log-$1" 2>&1 || { cat "$work/log-$1" >&2; exit 1; }
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("%.0f" % (s["steps"] / s["wall_time_s"]))' \
    "$work/results-$1/summary.json"
}

write_job BY_WORKER
write_job DYNAMIC
fixed=() dynamic=()
for ((r = 1; r <= rounds; r++)); do
  fixed+=("$(run BY_WORKER)")
  dynamic+=("$(run DYNAMIC)")
  echo "round $r: BY_WORKER ${fixed[-1]} steps/s, DYNAMIC ${dynamic[-1]} steps/s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
m_fixed=$(median "${fixed[@]}")
m_dynamic=$(median "${dynamic[@]}")
echo "median ($mode): BY_WORKER $m_fixed, DYNAMIC $m_dynamic steps/s; ratio $(awk -v a="$m_dynamic" -v b="$m_fixed" 'BEGIN { printf "%.3f", a / b }')"
