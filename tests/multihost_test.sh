#!/bin/bash
# Multi-host end to end on one machine: four network namespaces, each a "host" with its own
# address on a private /24 (10.77.N.0/24, N chosen per run) behind a Linux bridge, run 2
# ps_server and 2 ps_worker daemons from a ClusterSpec naming those addresses; psctl submits a
# small job from the root namespace (which has 10.77.N.1 on the bridge) and the job must
# converge. Namespaces, veths, bridge and daemons are removed on every exit.
#
# Needs root (CAP_NET_ADMIN and `ip netns`); elsewhere it says why and skips (exit 0). Traffic
# goes only to 10.77.N.x and loopback.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

# shellcheck source=tests/netns_testing.sh
source "$PWD/tests/netns_testing.sh"

readonly TAG="mh$$"                     # Unique per run: the namespaces' names start with it.
readonly DIR="${TEST_TMPDIR:-/tmp}/multihost-$$"
DAEMON_PIDS=()
LOG_FILES=("$DIR/*.log")
LOG_LINES=30

cleanup() {
  stop_pids 10 "${DAEMON_PIDS[@]}"
  netns_cleanup
  rm -rf "$DIR"
}
on_exit cleanup

mkdir -p "$DIR"
# Hosts 1 and 2 run ps:0 and ps:1, hosts 3 and 4 worker:0 and worker:1; host h is $NET.(10+h).
netns_setup "$TAG" 4

cat > "$DIR/cluster.json" <<EOF
{"cluster": {"ps": ["$NET.11:2222", "$NET.12:2222"],
             "worker": ["$NET.13:2222", "$NET.14:2222"]}}
EOF
cat > "$DIR/job.json" <<EOF
{"job_id": "multihost",
 "model": {"kind": "SOFTMAX_REGRESSION"},
 "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 4000, "feature_dim": 16,
                        "num_classes": 4},
          "test_fraction": 0.2},
 "learning_rate": {"base": 0.2},
 "consistency": {"mode": "SYNC"},
 "batch_size": 32, "steps": 300, "eval_interval": 100, "seed": 9, "min_slice_bytes": 64,
 "time_limit_s": 120}
EOF

start_daemon() {  # HOST BINARY TASK NAME [FLAGS...]
  local host=$1 binary=$2 task=$3 name=$4
  shift 4
  ip netns exec "${TAG}h$host" "$binary" --cluster_spec="$DIR/cluster.json" --task="$task" \
    --bind_host="$NET.$((10 + host))" --port_file="$DIR/$name.port" "$@" \
    > "$DIR/$name.log" 2>&1 &
  DAEMON_PIDS+=($!)
}
# Secure by default: a daemon refuses to serve plaintext on a network address; --insecure (as
# here, on the test's own private bridge) says so aloud.
ip netns exec "${TAG}h1" "$PS_SERVER" --cluster_spec="$DIR/cluster.json" --task=ps:0 \
  > "$DIR/refused.log" 2>&1 && fail "ps_server served plaintext on $NET.11 without --insecure"
grep -q "refusing to serve .* without TLS" "$DIR/refused.log" ||
  fail "ps_server did not say why it refused: $(cat "$DIR/refused.log")"
start_daemon 1 "$PS_SERVER" ps:0 ps-0 --insecure
start_daemon 2 "$PS_SERVER" ps:1 ps-1 --insecure
start_daemon 3 "$PS_WORKER" worker:0 worker-0 --device=cpu --insecure
start_daemon 4 "$PS_WORKER" worker:1 worker-1 --device=cpu --insecure
for name in ps-0 ps-1 worker-0 worker-1; do
  wait_until 30 test -s "$DIR/$name.port" || fail "$name did not start listening within 30s"
done

timeout 120 "$PSCTL" submit --cluster_spec="$DIR/cluster.json" --job="$DIR/job.json" \
  --results="$DIR/results" > "$DIR/submit.log" 2>&1 || fail "psctl submit exited $?"
cat "$DIR/submit.log"

timeout 60 "$PSCTL" status --cluster_spec="$DIR/cluster.json" --job=multihost \
  > "$DIR/status.log" 2>&1 || fail "psctl status exited $?"
cat "$DIR/status.log"
for task in "ps:0 ($NET.11:2222): up" "ps:1 ($NET.12:2222): up" \
            "worker:0 ($NET.13:2222): up" "worker:1 ($NET.14:2222): up"; do
  grep -qF "$task" "$DIR/status.log" || fail "psctl status does not show \"$task\""
done
[ "$(grep -c "INSECURE: plaintext off loopback" "$DIR/status.log")" -eq 4 ] ||
  fail "psctl status does not mark every --insecure task"

summary="$DIR/results/summary.json"
[ -f "$summary" ] || fail "no $summary"
cat "$summary"
grep -q '"state": "DONE"' "$summary" || fail "the job did not finish: $(grep '"state"' "$summary")"
grep -q '"steps": 300,' "$summary" || fail "the job did not run 300 steps"
accuracy=$(sed -n 's/.*"final_eval_accuracy": \([0-9.eE+-]*\).*/\1/p' "$summary")
[ -n "$accuracy" ] || fail "no final_eval_accuracy in $summary"
awk -v accuracy="$accuracy" 'BEGIN { exit !(accuracy >= 0.9) }' ||
  fail "final_eval_accuracy $accuracy is below 0.9"
log "PASSED: the job converged across 4 hosts (test accuracy $accuracy)"
