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

readonly JOB="$PWD/config/jobs/async_downpour.json"
readonly PSCTL="$PWD/ctl/psctl"
readonly CHECK="$PWD/tests/prometheus_check.py"
DIR=""
PSCTL_PID=""
PROMETHEUS_PID=""
POLICY_RC_D=""  # Set while apt-get runs with services held back.

log() { echo "prometheus_test: $*"; }
skip() {
  log "SKIPPED: $*"
  exit 0
}
show_logs() {
  [ -n "$DIR" ] || return 0
  for file in "$DIR"/psctl.out "$DIR"/prometheus.log "$DIR"/results.cluster/*.log; do
    [ -f "$file" ] && { echo "== $file"; tail -n 20 "$file"; }
  done
  return 0
}
fail() {
  log "FAILED: $*"
  show_logs
  exit 1
}

# SIGTERM to `pid`, SIGKILL after `grace_s`; reaps it.
stop() {
  local pid=$1 grace_s=$2
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq $((grace_s * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

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
  local status=$?
  set +e
  trap - ERR
  [ -n "$PROMETHEUS_PID" ] && stop "$PROMETHEUS_PID" 10
  # psctl local stops every daemon it started (SIGTERM, then SIGKILL after 10 s).
  [ -n "$PSCTL_PID" ] && stop "$PSCTL_PID" 20
  [ -n "$POLICY_RC_D" ] && rm -f "$POLICY_RC_D"
  [ -n "$DIR" ] && rm -rf "$DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'log "FAILED: line $LINENO: $BASH_COMMAND"' ERR

# --- Prometheus, installed if missing.
if ! command -v prometheus >/dev/null; then
  [ "$(id -u)" = 0 ] || skip "prometheus is not installed, and installing it needs root"
  command -v apt-get >/dev/null || skip "prometheus is not installed, and there is no apt-get"
  log "installing prometheus"
  if [ ! -e /usr/sbin/policy-rc.d ]; then  # Keep the package's own service from starting.
    POLICY_RC_D=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$POLICY_RC_D"
    chmod +x "$POLICY_RC_D"
  fi
  if ! output=$(DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y \
                  --no-install-recommends prometheus 2>&1); then
    skip "apt-get cannot install prometheus: $(tail -n 3 <<< "$output" | tr '\n' ' ')"
  fi
  rm -f "$POLICY_RC_D"
  POLICY_RC_D=""
  command -v prometheus >/dev/null || skip "installed prometheus, but found no prometheus program"
fi
log "$(prometheus --version 2>&1 | head -n 1)"

DIR="$(mktemp -d "${TEST_TMPDIR:-/tmp}/prometheus_test.XXXXXX")"

# --- The cluster, with /metrics on every daemon, kept after the job.
"$PSCTL" local --job="$JOB" --results="$DIR/results" --checkpoint_dir="$DIR/checkpoints" \
  --device=cpu --metrics_port=0 --keep_cluster \
  --ps_server_binary="$PWD/server/ps_server" --ps_worker_binary="$PWD/worker/ps_worker" \
  >"$DIR/psctl.out" 2>&1 &
PSCTL_PID=$!
for _ in $(seq 600); do
  output="$(cat "$DIR/psctl.out")"
  [[ "$output" == *"worker:1 metrics: "* ]] && break
  kill -0 "$PSCTL_PID" 2>/dev/null || fail "psctl local exited before the cluster was up"
  sleep 0.1
done
[[ "$output" == *"worker:1 metrics: "* ]] || fail "the cluster is not up after 60 s"
# "ps:0 metrics: http://127.0.0.1:PORT/metrics" -> "ps:0=127.0.0.1:PORT", for every task.
targets="$(sed -n 's|^\([a-z]*:[0-9]*\) metrics: http://\([^/]*\)/metrics$|\1=\2|p' \
             <<< "$output" | paste -sd, -)"
[ "$(tr ',' '\n' <<< "$targets" | wc -l)" = 4 ] || fail "psctl local printed the targets $targets"
log "the cluster's /metrics: $targets"

# --- The scrape configuration, each task asked for its port.
"$PSCTL" prometheus-config --cluster_spec="$DIR/results.cluster/cluster.json" \
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
for attempt in 1 2 3; do
  port="$(free_port)"
  prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/tsdb" \
    --web.listen-address="127.0.0.1:$port" >"$DIR/prometheus.log" 2>&1 &
  PROMETHEUS_PID=$!
  for _ in $(seq 300); do
    ready="$(http_status "http://127.0.0.1:$port/-/ready")"
    [ "$ready" = 200 ] && break
    kill -0 "$PROMETHEUS_PID" 2>/dev/null || break
    sleep 0.1
  done
  [ "$ready" = 200 ] && break
  stop "$PROMETHEUS_PID" 5
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
stop "$PSCTL_PID" 20
PSCTL_PID=""
[[ "$(cat "$DIR/psctl.out")" == *"stopped the local cluster"* ]] ||
  fail "psctl local did not stop its cluster"
code=0
output="$("$PSCTL" prometheus-config --cluster_spec="$DIR/results.cluster/cluster.json" 2>&1)" ||
  code=$?
[ "$code" = 1 ] || fail "prometheus-config on a stopped cluster: exit $code: $output"
for task in ps:0 ps:1 worker:0 worker:1; do
  [[ "$output" == *"$task (127.0.0.1:"*"): cannot ask for its /metrics port"* ]] ||
    fail "prometheus-config on a stopped cluster does not name $task: $output"
done
[[ "$output" == *"--metrics_port=PORT for every task"* ]] || fail "no fix in: $output"
# Fixed ports (systemd's 9100 and 9101) are not asked for: the cluster may be down.
output="$("$PSCTL" prometheus-config --cluster_spec="$DIR/results.cluster/cluster.json" \
            --metrics_port=9100 --worker_metrics_port=9101)" ||
  fail "prometheus-config with fixed ports failed: $output"
targets_written="$(grep -o '"127.0.0.1:[0-9]*"' <<< "$output" | tr -d '"' | paste -sd, -)"
[ "$targets_written" = "127.0.0.1:9100,127.0.0.1:9100,127.0.0.1:9101,127.0.0.1:9101" ] ||
  fail "prometheus-config --metrics_port=9100 --worker_metrics_port=9101 wrote: $output"
log "PASS"
