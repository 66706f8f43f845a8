#!/usr/bin/env bash
# A real Prometheus scrapes a local cluster while it runs a job; its HTTP API must then give the
# job's staleness histograms and examples/s exactly as the job's results have them.
#
# Installs Debian's prometheus when missing (apt-get, its own service kept from starting), then:
# starts `psctl local --metrics_port=0 --keep_cluster` with an ASYNC job of 2 workers on 2 ps
# (config/jobs/async_downpour.json, whose gradients arrive with staleness 0 to a few), writes the
# scrape configuration with `psctl prometheus-config` (every task asked for its /metrics port; a
# 1 s scrape interval) and checks it names the ports psctl local printed, runs `prometheus` on it
# on a free loopback port with its data in a temporary directory, and hands over to
# tests/prometheus_check.py, which waits until every target is up, the job is DONE and every
# target was scraped once more, and compares (its header says how, and why exactly). The job may
# end before Prometheus's first scrape: the values checked are the final ones, which the daemons
# keep after the job. Last, with the cluster stopped, prometheus-config must fail naming the
# tasks that are down, and write fixed ports (--metrics_port, --worker_metrics_port) unasked.
#
# Skips (passes), saying why, where prometheus is missing and cannot be installed (not root, no
# apt-get, no archive). Everything it starts is stopped by pid on every exit.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

readonly JOB="$RUNFILES/config/jobs/async_downpour.json"
readonly CHECK="$RUNFILES/tests/prometheus_check.py"
DIR=""
PROMETHEUS_PID=""

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
# The HTTP status of a GET of `url`, or nothing when it cannot be had.
http_status() {
  python3 -c 'import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=1).status)' \
    "$1" 2>/dev/null || true
}

cleanup() {
  [ -n "$PROMETHEUS_PID" ] && stop_pid "$PROMETHEUS_PID" 10
  # psctl local stops every daemon it started (SIGTERM, then SIGKILL after 10 s).
  [ -n "$PSCTL_LOCAL_PID" ] && stop_pid "$PSCTL_LOCAL_PID" 20
  [ -n "$DIR" ] && rm -rf "$DIR"
}
on_exit cleanup

# --- Prometheus, installed if missing.
apt_install_if_missing prometheus prometheus
log "$(prometheus --version 2>&1 | head -n 1)"

DIR="$(mktemp -d "${TEST_TMPDIR:-/tmp}/prometheus_test.XXXXXX")"
LOG_FILES=("$DIR/psctl.out" "$DIR/prometheus.log" "$DIR/results.cluster/*.log")

# --- The cluster, with /metrics on every daemon, kept after the job; psctl local prints each
# task's /metrics address after its ClusterSpec.
start_psctl_local "$DIR/psctl.out" --job="$JOB" --results="$DIR/results" \
  --checkpoint_dir="$DIR/checkpoints" --device=cpu --metrics_port=0 --keep_cluster
metrics_printed() {
  output="$(cat "$DIR/psctl.out")"
  [[ "$output" == *"worker:1 metrics: "* ]]
}
wait_while_running "$PSCTL_LOCAL_PID" "psctl local" 60 metrics_printed ||
  fail "the cluster is not up after 60 s"
# "ps:0 metrics: http://127.0.0.1:PORT/metrics" -> "ps:0=127.0.0.1:PORT", for every task.
targets="$(sed -n 's|^\([a-z]*:[0-9]*\) metrics: http://\([^/]*\)/metrics$|\1=\2|p' \
             <<< "$output" | paste -sd, -)"
[ "$(tr ',' '\n' <<< "$targets" | wc -l)" = 4 ] || fail "psctl local printed the targets $targets"
log "the cluster's /metrics: $targets"

# --- The scrape configuration, each task asked for its port.
"$PSCTL" prometheus-config --cluster_spec="$CLUSTER_SPEC" \
  --scrape_interval=1s --out="$DIR/prometheus.yml" || fail "psctl prometheus-config failed"
for target in ${targets//,/ }; do
  want="      - targets: [\"${target#*=}\"]"$'\n'"        labels:"
  want+=$'\n'"          task: \"${target%%=*}\""
  [[ "$(cat "$DIR/prometheus.yml")" == *"$want"* ]] ||
    fail "prometheus.yml lacks ${target%%=*}'s target: $(cat "$DIR/prometheus.yml")"
done
if command -v promtool >/dev/null; then
  promtool check config "$DIR/prometheus.yml" >"$DIR/promtool.out" 2>&1 ||
    fail "promtool refuses the configuration: $(cat "$DIR/promtool.out")"
fi

# --- Prometheus on a free loopback port (another can take it between the pick and the bind:
# then it exits at once, and the next pick is tried).
# Whether Prometheus is ready (`ready`: its /-/ready's HTTP status) or has ended.
ready_or_ended() {
  ready="$(http_status "http://127.0.0.1:$port/-/ready")"
  [ "$ready" = 200 ] || ! kill -0 "$PROMETHEUS_PID" 2>/dev/null
}
for attempt in 1 2 3; do
  port="$(free_port)"
  prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/tsdb" \
    --web.listen-address="127.0.0.1:$port" >"$DIR/prometheus.log" 2>&1 &
  PROMETHEUS_PID=$!
  wait_until 30 ready_or_ended || true
  [ "$ready" = 200 ] && break
  stop_pid "$PROMETHEUS_PID" 5
  PROMETHEUS_PID=""
  log "prometheus did not come up on port $port (try $attempt): $(tail -n 2 "$DIR/prometheus.log")"
done
[ -n "$PROMETHEUS_PID" ] || fail "prometheus did not start"
log "prometheus ready at http://127.0.0.1:$port"

# --- What Prometheus scraped against the results.
python3 "$CHECK" --prometheus="http://127.0.0.1:$port" --results="$DIR/results" \
  --targets="$targets" || fail "Prometheus's answers differ from the job's results"
tail -n 3 "$DIR/psctl.out"

# --- With the cluster stopped, prometheus-config names the tasks it cannot ask.
stop_pid "$PSCTL_LOCAL_PID" 20
PSCTL_LOCAL_PID=""
[[ "$(cat "$DIR/psctl.out")" == *"stopped the local cluster"* ]] ||
  fail "psctl local did not stop its cluster"
code=0
output="$("$PSCTL" prometheus-config --cluster_spec="$CLUSTER_SPEC" 2>&1)" ||
  code=$?
[ "$code" = 138 ] || fail "prometheus-config on a stopped cluster: exit $code: $output"
for task in ps:0 ps:1 worker:0 worker:1; do
  [[ "$output" == *"$task (127.0.0.1:"*"): cannot ask for its /metrics port"* ]] ||
    fail "prometheus-config on a stopped cluster does not name $task: $output"
done
[[ "$output" == *"--metrics_port=PORT for every task"* ]] || fail "no fix in: $output"
# Fixed ports (systemd's 9100 and 9101) are not asked for: the cluster may be down.
output="$("$PSCTL" prometheus-config --cluster_spec="$CLUSTER_SPEC" \
            --metrics_port=9100 --worker_metrics_port=9101)" ||
  fail "prometheus-config with fixed ports failed: $output"
targets_written="$(grep -o '"127.0.0.1:[0-9]*"' <<< "$output" | tr -d '"' | paste -sd, -)"
[ "$targets_written" = "127.0.0.1:9100,127.0.0.1:9100,127.0.0.1:9101,127.0.0.1:9101" ] ||
  fail "prometheus-config --metrics_port=9100 --worker_metrics_port=9101 wrote: $output"
log "PASS"
