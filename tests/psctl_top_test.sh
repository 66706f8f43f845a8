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
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

DIR=""
SOCKET_DIR=""  # The tmux server's socket: short, unlike $TEST_TMPDIR (108 bytes at most).
TMUX_PID=""  # The private tmux server.
LOG_LINES=40

tmux_() { tmux -S "$SOCKET_DIR/tmux" -f /dev/null "$@"; }

cleanup() {
  [ -n "$TMUX_PID" ] && terminate "$TMUX_PID" 5  # Not a child of this shell: tmux daemonizes.
  [ -n "$PSCTL_LOCAL_PID" ] && stop_pid "$PSCTL_LOCAL_PID" 30
  [ -n "$SOCKET_DIR" ] && rm -rf "$SOCKET_DIR"
  if [ -n "$DIR" ]; then
    keep_outputs "$DIR"/screen*.txt
    rm -rf "$DIR"
  fi
}
on_exit cleanup

# --- tmux, installed if missing.
apt_install_if_missing tmux tmux
log "$(tmux -V)"

DIR=$(mktemp -d "${TEST_TMPDIR:-/tmp}/psctl_top.XXXXXX")
LOG_FILES=("$DIR/local.log" "$DIR/screen.txt" "$DIR/results.cluster/*.log")
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
start_psctl_local "$DIR/local.log" --job="$DIR/job.json" --ps=2 --workers=2 --device=cpu \
  --results="$DIR/results" --checkpoint_dir="$DIR/checkpoints"
log "cluster: $CLUSTER_SPEC"

# --- psctl top in a detached tmux session on a server of this test's own; after top, the
# same shell records top's exit status and the terminal's settings.
tmux_ new-session -d -s top -x 120 -y 40 \
  "bash -c '\"$PSCTL\" top --cluster_spec=\"$CLUSTER_SPEC\"; \
echo \"exit=\$?\" > \"$DIR/top.exit\"; stty -a > \"$DIR/top.stty\"; sleep 60'"
TMUX_PID=$(tmux_ display-message -p -t top '#{pid}')
TOP_PID=""
# Whether psctl top runs (its pid in TOP_PID): its command line starts with psctl's path (bash's
# with "bash -c").
top_runs() {
  TOP_PID=$(pgrep -f "^$PSCTL top --cluster_spec=$CLUSTER_SPEC" || true)
  [ -n "$TOP_PID" ]
}
wait_until 5 top_runs || fail "psctl top did not start in the tmux pane"
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

screen=""
# Whether the screen (then in `screen`) shows every task up and the job stepping.
top_shows_steps() {
  screen=$(capture)
  every_task_up "$screen" && [ -n "$(global_step "$screen")" ]
}

# --- A screen with every task up and the job stepping: then its global step.
WAIT_INTERVAL_S=0.5 wait_while_running "$TOP_PID" "psctl top" 30 top_shows_steps || true
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
# Whether the screen (then in `screen`) says the barrier waits for worker:1 (that line then in
# `waiting`).
barrier_waits() {
  screen=$(capture)
  waiting=$(grep -E "^  barrier at step [0-9]+ waits for worker:1 for [0-9]+\.[0-9] s$" \
              <<< "$screen" || true)
  [ -n "$waiting" ]
}
WAIT_INTERVAL_S=0.5 wait_until 20 barrier_waits || true
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
wait_until 5 test -s "$DIR/top.stty" || fail "psctl top did not exit within 5 s of q: $(capture)"
! kill -0 "$TOP_PID" 2>/dev/null || fail "psctl top $TOP_PID still runs after q"
[ "$(cat "$DIR/top.exit")" = "exit=0" ] || fail "psctl top after q: $(cat "$DIR/top.exit")"
stty_after=$(cat "$DIR/top.stty")
[[ " $stty_after " == *" icanon "* && " $stty_after " == *" echo "* ]] ||
  fail "psctl top left the terminal raw: $stty_after"
screen=$(capture)
[[ "$screen" != *"psctl top"* ]] || fail "the alternate screen is still shown: $screen"

# --- Stop: the tmux server, then the job and the cluster.
terminate "$TMUX_PID" 5 || fail "the tmux server $TMUX_PID did not stop"
TMUX_PID=""
stop_pid "$PSCTL_LOCAL_PID" 30
PSCTL_LOCAL_PID=""
[ "$STOPPED" = 130 ] || fail "psctl local did not stop the job with exit status 130: $STOPPED"
log "PASSED"
