#!/bin/bash
# psctl dashboard seen in a real headless Chromium during a job. Starts a local cluster (2 ps,
# 2 workers) running an ASYNC job with `psctl local`, then `psctl dashboard` on a free port
# against its ClusterSpec, and opens the page with tests/dashboard_chromium_check.js, which
# drives Chromium over the DevTools protocol: once the page has shown the job RUNNING for 8
# snapshots (8 s of history), it checks that the page logged no console error and threw no
# exception, requested nothing but the dashboard (every other host name fails to resolve), lists
# the 4 tasks up and the job, and draws each worker's series in the loss, examples/s and
# staleness charts (its colour's pixels in each chart's canvas in a screenshot), and, the job
# being traced, its timeline: a row per task with spans drawn. Then SIGTERM
# stops the dashboard (exit 0, within 5 s) and psctl local (the job and the daemons with it), and
# no process started for the test may be left. Also: psctl dashboard prints its address, and
# refuses a port out of range (exit 2) and a port in use (exit 138). The screenshot, the DOM, the
# console and the requests are kept in the test's undeclared outputs.
#
# Installs Debian's chromium when no chromium or chromium-headless-shell is found (root and
# apt-get needed); skips (passes), saying why, where it cannot, or where there is no node.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

readonly CHECK="$RUNFILES/tests/dashboard_chromium_check.js"
readonly JOB_ID=dashboard
DIR=""
DASHBOARD_PID=""

# Processes whose command line mentions the test's directory (every one it started does).
left_behind() {
  local listing
  listing=$(ps -eo pid=,args=)
  grep -F -- "$DIR" <<< "$listing" | awk '{ print $1 }' || true
}

cleanup() {
  [ -n "$DASHBOARD_PID" ] && stop_pid "$DASHBOARD_PID" 15
  [ -n "$PSCTL_LOCAL_PID" ] && stop_pid "$PSCTL_LOCAL_PID" 15
  if [ -n "$DIR" ]; then
    kill_left_behind "$(left_behind)" || EXIT_STATUS=1
    keep_outputs "$DIR"/out/. "$DIR"/*.log
    rm -rf "$DIR"
  fi
}
on_exit cleanup

# --- Chromium and node, Chromium installed if missing.
command -v node > /dev/null || skip "no node (Node.js) to drive Chromium with"
CHROMIUM=$(command -v chromium || command -v chromium-headless-shell || true)
if [ -z "$CHROMIUM" ]; then
  apt_install_if_missing chromium chromium
  CHROMIUM=$(command -v chromium)
fi
log "$("$CHROMIUM" --version 2>/dev/null | head -n 1) at $CHROMIUM"
# Chromium will not run as root with its sandbox.
NO_SANDBOX=()
[ "$(id -u)" = 0 ] && NO_SANDBOX=(--no_sandbox)

DIR=$(mktemp -d "${TEST_TMPDIR:-/tmp}/dashboard.XXXXXX")
LOG_FILES=("$DIR/*.log" "$DIR/results.cluster/*.log")

# --- A local cluster running a job long enough to chart (psctl local stops it at the end).
cat > "$DIR/job.json" <<EOF
{"job_id": "$JOB_ID",
 "model": {"kind": "SOFTMAX_REGRESSION"},
 "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 4000, "feature_dim": 16,
                        "num_classes": 4},
          "test_fraction": 0.2},
 "learning_rate": {"base": 0.05},
 "consistency": {"mode": "ASYNC", "max_staleness": 16},
 "batch_size": 32, "steps": 100000000, "eval_interval": 1000, "seed": 5, "min_slice_bytes": 64,
 "time_limit_s": 300, "trace": true}
EOF
# --device=auto with no CUDA plugin to be found: the workers' Device cell then says why they use
# the CPU (on a GPU host too), the longest sentence a task shows, which the page must still fit
# in its window.
export PS_CUDA_LIBRARY=/nonexistent/libps_cuda.so
start_psctl_local "$DIR/local.log" --job="$DIR/job.json" --ps=2 --workers=2 --device=auto \
  --results="$DIR/results" --checkpoint_dir="$DIR/checkpoints"
log "cluster: $CLUSTER_SPEC"

# --- The dashboard on a free port.
"$PSCTL" dashboard --cluster_spec="$CLUSTER_SPEC" --port=0 --port_file="$DIR/dashboard.port" \
  > "$DIR/dashboard.log" 2>&1 &
DASHBOARD_PID=$!
wait_while_running "$DASHBOARD_PID" "psctl dashboard" 30 test -s "$DIR/dashboard.port" ||
  fail "psctl dashboard did not listen within 30 s"
PORT=$(cat "$DIR/dashboard.port")
URL="http://127.0.0.1:$PORT/"
printed=$(cat "$DIR/dashboard.log")
[[ "$printed" == *"psctl dashboard: $URL "* ]] || fail "psctl dashboard did not print $URL: $printed"
log "dashboard: $URL"
# Refusals: a port out of range (exit 2), the port taken (exit 138: try again later), each
# saying so.
code=0
output=$("$PSCTL" dashboard --cluster_spec="$CLUSTER_SPEC" --port=70000 2>&1) || code=$?
[[ "$code" = 2 && "$output" == *"--port is a port"* ]] ||
  fail "psctl dashboard --port=70000: exit $code, $output"
code=0
output=$(timeout 20 "$PSCTL" dashboard --cluster_spec="$CLUSTER_SPEC" --port="$PORT" 2>&1) || code=$?
[[ "$code" = 138 && "$output" == *"dashboard: cannot listen on 127.0.0.1:$PORT"* ]] ||
  fail "a second psctl dashboard on port $PORT: exit $code, $output"

# psctl dashboard samples the cluster each second from its start: the page, opened 3 s later,
# must start with those samples in its charts (the check's history test).
sleep 3

# --- The page in Chromium, once the job has run for 8 of the page's snapshots.
if ! node "$CHECK" --chromium="$CHROMIUM" --url="$URL" --out="$DIR/out" \
       --tasks=ps:0,ps:1,worker:0,worker:1 --job="$JOB_ID" --workers=2 --min_snapshots=8 \
       --timeline=ps:0,ps:1,worker:0,worker:1 \
       --timeout_s=90 "${NO_SANDBOX[@]}"; then
  fail "the page in Chromium (see above; the screenshot and logs are in the test's outputs)"
fi

# --- A clean stop: the dashboard at once, then the job and the cluster.
stop_pid "$DASHBOARD_PID" 5
DASHBOARD_PID=""
[ "$STOPPED" = 0 ] || fail "psctl dashboard did not exit 0 within 5 s of SIGTERM: $STOPPED"
stop_pid "$PSCTL_LOCAL_PID" 30
PSCTL_LOCAL_PID=""
[ "$STOPPED" = 130 ] || fail "psctl local did not stop the job with exit status 130: $STOPPED"
left=$(left_behind)
[ -z "$left" ] || fail "processes left running: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
log "PASSED"
