#!/bin/bash
# psctl top on a real terminal: tmux's. Starts a local cluster (2 ps, 2 workers) with `psctl
# local`, running a SYNC job whose worker:1 straggles (each step sleeps U(0, 2 s) more), so that
# the barrier waits for it most of the time. Then runs `psctl top` in a detached tmux session
# of 120 by 40 on a private tmux server, reads the screen with `tmux capture-pane` and checks
# that it shows every task up, the job's global step advancing between two screens 3.5 s apart,
# and the line "barrier at step N waits for worker:1 for T s". Last it presses q (tmux
# send-keys): top must exit 0 at once and give the terminal back (canonical input and echo on,
# as `stty -a` run after it in the same pane says). Everything it started is stopped by pid.
#
# Installs Debian's tmux when missing (root and apt-get needed); skips (passes), saying why,
# where it cannot.
set -euo pipefail

readonly PSCTL="$PWD/ctl/psctl"
DIR=""
SOCKET_DIR=""  # The tmux server's socket: short, unlike $TEST_TMPDIR (108 bytes at most).
LOCAL_PID=""
TMUX_PID=""  # The private tmux server.

log() { echo "psctl_top_test: $*"; }
skip() {
  log "SKIPPED: $*"
  exit 0
}
show_logs() {
  [ -n "$DIR" ] || return 0
  for file in "$DIR"/local.log "$DIR"/screen.txt "$DIR"/results.cluster/*.log; do
    [ -f "$file" ] && { echo "== $file"; tail -n 40 "$file"; }
  done
  return 0
}
fail() {
  log "FAILED: $*"
  show_logs
  exit 1
}

# SIGTERM to child `pid`; SIGKILL after `grace_s`. Sets STOPPED to its exit status, or "killed".
STOPPED=""
stop_pid() {
  local pid=$1 grace_s=$2
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq $((grace_s * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    STOPPED=killed
    return
  fi
  STOPPED=0
  wait "$pid" 2>/dev/null || STOPPED=$?
}

tmux_() { tmux -S "$SOCKET_DIR/tmux" -f /dev/null "$@"; }

cleanup() {
  local status=$?
  set +e
  trap - ERR
  if [ -n "$TMUX_PID" ]; then  # Not a child of this shell: tmux daemonizes.
    kill -TERM "$TMUX_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$TMUX_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$TMUX_PID" 2>/dev/null
  fi
  [ -n "$LOCAL_PID" ] && stop_pid "$LOCAL_PID" 30
  [ -n "$SOCKET_DIR" ] && rm -rf "$SOCKET_DIR"
  if [ -n "$DIR" ]; then
    [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ] && cp "$DIR"/screen*.txt "$TEST_UNDECLARED_OUTPUTS_DIR"/ 2>/dev/null
    rm -rf "$DIR"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'log "FAILED: line $LINENO: $BASH_COMMAND"' ERR

# --- tmux, installed if missing.
if ! command -v tmux > /dev/null; then
  [ "$(id -u)" = 0 ] || skip "no tmux, and installing it needs root"
  command -v apt-get > /dev/null || skip "no tmux, and no apt-get to install it"
  log "installing tmux"
  if ! output=$(DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y \
                  --no-install-recommends tmux 2>&1); then
    skip "apt-get cannot install tmux: $(tail -n 3 <<< "$output" | tr '\n' ' ')"
  fi
  command -v tmux > /dev/null || skip "installed tmux, but there is no tmux command"
fi
log "$(tmux -V)"

DIR=$(mktemp -d "${TEST_TMPDIR:-/tmp}/psctl_top.XXXXXX")
SOCKET_DIR=$(mktemp -d /tmp/psctl_top.XXXXXX)

# --- A local cluster running a SYNC job with a straggler (psctl local stops it at the end).
cat > "$DIR/job.json" <<EOF
{"job_id": "top",
 "model": {"kind": "SOFTMAX_REGRESSION"},
 "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 4000, "feature_dim": 16,
                        "num_classes": 4},
          "test_fraction": 0.2},
 "learning_rate": {"base": 0.05},
 "consistency": {"mode": "SYNC"},
 "stragglers": {"distribution": "UNIFORM", "workers": [1], "mean_delay_ms": 1000},
 "batch_size": 32, "steps": 100000000, "eval_interval": 1000, "seed": 5, "time_limit_s": 300}
EOF
"$PSCTL" local --job="$DIR/job.json" --ps=2 --workers=2 --device=cpu --results="$DIR/results" \
  --checkpoint_dir="$DIR/checkpoints" --ps_server_binary="$PWD/server/ps_server" \
  --ps_worker_binary="$PWD/worker/ps_worker" > "$DIR/local.log" 2>&1 &
LOCAL_PID=$!
SPEC=""
for _ in $(seq 600); do
  SPEC=$(sed -n 's/^cluster: //p' "$DIR/local.log")
  [ -n "$SPEC" ] && break
  kill -0 "$LOCAL_PID" 2>/dev/null || fail "psctl local exited before its cluster listened"
  sleep 0.1
done
[ -n "$SPEC" ] || fail "psctl local's cluster did not come up within 60 s"
log "cluster: $SPEC"

# --- psctl top in a detached tmux session on a server of this test's own; after top, the
# same shell records top's exit status and the terminal's settings.
tmux_ new-session -d -s top -x 120 -y 40 \
  "bash -c '\"$PSCTL\" top --cluster_spec=\"$SPEC\"; echo \"exit=\$?\" > \"$DIR/top.exit\"; \
stty -a > \"$DIR/top.stty\"; sleep 60'"
TMUX_PID=$(tmux_ display-message -p -t top '#{pid}')
TOP_PID=""
for _ in $(seq 50); do  # Its command line starts with psctl's path (bash's with "bash -c").
  TOP_PID=$(pgrep -f "^$PSCTL top --cluster_spec=$SPEC" || true)
  [ -n "$TOP_PID" ] && break
  sleep 0.1
done
[ -n "$TOP_PID" ] || fail "psctl top did not start in the tmux pane"
log "tmux server $TMUX_PID, psctl top $TOP_PID"

# The screen now (also kept in screen.txt for the logs).
capture() {
  tmux_ capture-pane -p -t top > "$DIR/screen.txt"
  cat "$DIR/screen.txt"
}
global_step() { sed -n 's/^  SYNC, global step \([0-9]*\),.*/\1/p' <<< "$1"; }
every_task_up() {
  local task
  for task in ps:0 ps:1 worker:0 worker:1; do
    grep -Eq "^$task +127\.0\.0\.1:[0-9]+ +up +[0-9]+ " <<< "$1" || return 1
  done
}

# --- A screen with every task up and the job stepping: then its global step.
screen=""
for _ in $(seq 60); do
  screen=$(capture)
  every_task_up "$screen" && [ -n "$(global_step "$screen")" ] && break
  kill -0 "$TOP_PID" 2>/dev/null || fail "psctl top exited: $screen"
  sleep 0.5
done
every_task_up "$screen" || fail "psctl top does not show every task up within 30 s: $screen"
first=$(global_step "$screen")
[ -n "$first" ] || fail "psctl top shows no SYNC job with a global step: $screen"
cp "$DIR/screen.txt" "$DIR/screen_first.txt"
log "first screen: global step $first"
[[ "$screen" == *"psctl top  20"*"  tasks: 4 of 4 up  1 job"* ]] || fail "header: $screen"
[[ "$screen" == *$'\n'"job top: RUNNING (run "* ]] || fail "no job line: $screen"

# --- The barrier waiting for the straggler, named with how long (within 20 s: worker:0 waits at
# nearly every step).
waiting=""
for _ in $(seq 40); do
  screen=$(capture)
  waiting=$(grep -E "^  barrier at step [0-9]+ waits for worker:1 for [0-9]+\.[0-9] s$" \
              <<< "$screen" || true)
  [ -n "$waiting" ] && break
  sleep 0.5
done
[ -n "$waiting" ] || fail "no screen in 20 s says the barrier waits for worker:1: $screen"
log "seen: $waiting"
grep -Eq "^  worker:1 +RUNNING +[0-9]+ " <<< "$screen" || fail "no worker:1 row: $screen"

# --- 3.5 s later (a step of worker:1 takes at most about 2 s), a later global step.
sleep 3.5
screen=$(capture)
second=$(global_step "$screen")
[ -n "$second" ] && [ "$second" -gt "$first" ] ||
  fail "the global step did not advance from $first: $screen"
log "later screen: global step $second"

# --- q: top exits 0 at once, and the terminal is as before.
tmux_ send-keys -t top q
for _ in $(seq 50); do
  [ -s "$DIR/top.stty" ] && break
  sleep 0.1
done
[ -s "$DIR/top.stty" ] || fail "psctl top did not exit within 5 s of q: $(capture)"
! kill -0 "$TOP_PID" 2>/dev/null || fail "psctl top $TOP_PID still runs after q"
[ "$(cat "$DIR/top.exit")" = "exit=0" ] || fail "psctl top after q: $(cat "$DIR/top.exit")"
stty_after=$(cat "$DIR/top.stty")
[[ " $stty_after " == *" icanon "* && " $stty_after " == *" echo "* ]] ||
  fail "psctl top left the terminal raw: $stty_after"
screen=$(capture)
[[ "$screen" != *"psctl top"* ]] || fail "the alternate screen is still shown: $screen"

# --- Stop: the tmux server, then the job and the cluster.
kill -TERM "$TMUX_PID"
for _ in $(seq 50); do kill -0 "$TMUX_PID" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$TMUX_PID" 2>/dev/null || fail "the tmux server $TMUX_PID did not stop"
TMUX_PID=""
stop_pid "$LOCAL_PID" 30
[ "$STOPPED" = 130 ] || fail "psctl local did not stop the job with exit status 130: $STOPPED"
LOCAL_PID=""
log "PASSED"
