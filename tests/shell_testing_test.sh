#!/usr/bin/env bash
# tests/shell_testing.sh against its contracts: messages, skip and fail (exit status, logs
# shown), on_exit (cleanup, EXIT_STATUS, a failing command), stop_pid and terminate (exit
# status, "killed" after the grace, other processes), stop_pids' order, wait_until's deadline,
# wait_while_running (an ended process fails the test, but not when the command succeeds just
# before it ended), kill_left_behind, keep_outputs, and apt_install_if_missing with nothing
# missing (no apt-get run) and without apt-get (a skip). Installs nothing; about 10 s.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

DIR=$(mktemp -d "${TEST_TMPDIR:-/tmp}/shell testing.XXXXXX")  # A space on purpose.
cleanup() {
  jobs -p | xargs -r kill -KILL 2>/dev/null
  rm -rf "$DIR"
}
on_exit cleanup

# run_script NAME BODY: runs BODY as a test script DIR/NAME.sh that sourced the library (set -e,
# in this runfiles tree); sets OUTPUT (stdout and stderr) and CODE (its exit status).
run_script() {
  # shellcheck disable=SC2016  # $PWD: the script's own.
  printf '#!/bin/bash\nset -euo pipefail\nsource "$PWD/tests/shell_testing.sh"\n%s\n' "$2" \
    > "$DIR/$1.sh"
  CODE=0
  OUTPUT=$(bash "$DIR/$1.sh" 2>&1) || CODE=$?
}
# expect WHAT CONDITION...: fails "WHAT" with OUTPUT where CONDITION (a command) fails.
expect() {
  local what=$1
  shift
  "$@" || fail "$what; the output was: $OUTPUT"
}
has() { [[ "$OUTPUT" == *"$1"* ]]; }

# --- Messages, skip, fail and show_logs.
[ "$(log a b)" = "shell_testing_test: a b" ] || fail "log printed \"$(log a b)\""
run_script skip 'skip "no reason"; echo after'
expect "skip exits 0 at once" [ "$CODE" = 0 ]
expect "skip says why" [ "$OUTPUT" = "skip: SKIPPED: no reason" ]
printf '1\n2\n3\n' > "$DIR/first.log"
echo other > "$DIR/second.log"
run_script fail "LOG_FILES=('$DIR/*.log' '$DIR/none*'); LOG_LINES=2; fail \"it broke\"; echo after"
expect "fail exits 1 at once" [ "$CODE" = 1 ]
expect "fail shows the last LOG_LINES lines of each log" [ "$OUTPUT" = "fail: FAILED: it broke
== $DIR/first.log
2
3
== $DIR/second.log
other" ]

# --- on_exit.
# shellcheck disable=SC2016  # The scripts' own variables.
run_script pass 'cleanup() { echo "cleanup: $EXIT_STATUS"; }; on_exit cleanup; echo done'
expect "on_exit runs cleanup on a pass" [ "$CODE:$OUTPUT" = "0:done
cleanup: 0" ]
# shellcheck disable=SC2016
run_script error 'cleanup() { echo "cleanup: $EXIT_STATUS"; }; on_exit cleanup; false; echo after'
expect "a failing command fails the test" [ "$CODE" = 1 ]
expect "a failing command is named, cleanup runs" [ "$OUTPUT" = "error: FAILED: line 4: false
cleanup: 1" ]
run_script left 'cleanup() { EXIT_STATUS=1; }; on_exit cleanup; skip "why"'
expect "cleanup sets the exit status" [ "$CODE" = 1 ]
# Children signalled at once, before they exec sleep, and a subshell: none runs cleanup (which
# would print to stdout). The children's stderr is dropped: a child bash signalled while it
# forks may warn there ("wait_for: No record of process N"), a bash race, not cleanup's.
run_script children 'cleanup() { echo cleanup; }; on_exit cleanup
for _ in 1 2 3 4 5; do { sleep 30 & } 2>/dev/null; kill -TERM $!; done; sleep 0.5; (exit 0)'
expect "only the test's shell runs cleanup" [ "$CODE:$OUTPUT" = "0:cleanup" ]

# --- stop_pid, terminate, stop_pids.
(exit 7) &
sleep 0.2
stop_pid $! 1
[ "$STOPPED" = 7 ] || fail "stop_pid on a child that exited 7: $STOPPED"
sleep 30 &
sleep 0.2  # Until it is sleep (a child signalled before is still bash: on_exit's test above).
stop_pid $! 1
[ "$STOPPED" = 143 ] || fail "stop_pid on a sleep (SIGTERM): $STOPPED"
# A child that ignores SIGTERM, once it does (it then writes DIR/ignoring).
python3 -c 'import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "w").write("yes")
time.sleep(30)' "$DIR/ignoring" &
pid=$!
wait_until 10 test -s "$DIR/ignoring" || fail "python3 did not start"
start=$EPOCHREALTIME
stop_pid "$pid" 1
[ "$STOPPED" = killed ] || fail "stop_pid on a child ignoring SIGTERM: $STOPPED"
awk -v s="$start" -v e="$EPOCHREALTIME" 'BEGIN { exit !(e - s >= 1) }' ||
  fail "stop_pid killed before the grace"
# Not a child: setsid -f forks it away.
setsid -f bash -c "echo \$\$ > '$DIR/other.pid'; exec sleep 30"
wait_until 10 test -s "$DIR/other.pid" || fail "no other process"
other=$(cat "$DIR/other.pid")
terminate "$other" 1 || fail "terminate had to kill a sleep"
! running "$other" || fail "terminate left $other running"
pids=()
for name in first second; do
  bash -c "trap 'echo $name >> \"$DIR/order\"; exit 0' TERM; echo > \"$DIR/$name.ready\"
           while :; do sleep 0.1; done" &
  pids+=($!)
  wait_until 10 test -s "$DIR/$name.ready" || fail "$name did not start"
done
stop_pids 5 "${pids[@]}"
[ "$(cat "$DIR/order")" = $'second\nfirst' ] || fail "stop_pids' order: $(cat "$DIR/order")"

# --- wait_until and wait_while_running.
tries=0
third_try() { tries=$((tries + 1)); ((tries >= 3)); }
wait_until 5 third_try || fail "wait_until gave up after $tries tries"
start=$EPOCHREALTIME
! wait_until 1 false || fail "wait_until false succeeded"
awk -v s="$start" -v e="$EPOCHREALTIME" 'BEGIN { exit !(e - s >= 1 && e - s < 3) }' ||
  fail "wait_until 1 false took $start to $EPOCHREALTIME"
run_script ended 'sleep 0.3 & wait_while_running $! sleeper 10 false'
expect "an ended process fails wait_while_running" [ "$CODE" = 1 ]
expect "wait_while_running names it" has "FAILED: sleeper (pid "
# The command's first try fails, then the process ends: what it did before counts.
run_script wrote "sleep 30 & pid=\$!
ended_after_first_try() {
  [ -e '$DIR/tried' ] && return 0
  touch '$DIR/tried'; kill -KILL \$pid; wait \$pid; return 1
}
wait_while_running \$pid sleeper 10 ended_after_first_try; echo waited"
expect "what a process did before it ended counts" [ "$CODE" = 0 ]
expect "wait_while_running returned" has waited

# --- kill_left_behind and keep_outputs.
kill_left_behind "" || fail "kill_left_behind found something in nothing"
sleep 31 &
first=$!
sleep 32 &
second=$!
sleep 0.2  # Until both are sleep, not yet bash.
OUTPUT=$(kill_left_behind "$first
$second") && fail "kill_left_behind returned 0"
expect "kill_left_behind names them" has "processes left behind, killed: "
expect "kill_left_behind names the first" has "$first sleep 31;"
expect "kill_left_behind names the second" has "$second sleep 32"
wait "$first" "$second" 2>/dev/null || true
if kill -0 "$first" 2>/dev/null || kill -0 "$second" 2>/dev/null; then
  fail "kill_left_behind left them running"
fi
mkdir -p "$DIR/outputs" "$DIR/folder"
echo in > "$DIR/folder/inside"
TEST_UNDECLARED_OUTPUTS_DIR="$DIR/outputs" keep_outputs "$DIR/first.log" "$DIR/folder/." \
  "$DIR/missing" || fail "keep_outputs failed"
[ "$(cd "$DIR/outputs" && ls)" = $'first.log\ninside' ] || fail "kept: $(ls "$DIR/outputs")"

# --- apt_install_if_missing: nothing missing, then no apt-get on PATH.
OUTPUT=$(apt_install_if_missing no-such-package bash ls) || fail "it failed"
expect "nothing missing: nothing done" [ -z "$OUTPUT" ]
mkdir "$DIR/bin"
ln -s "$(command -v id)" "$DIR/bin/id"
run_script apt "PATH='$DIR/bin' apt_install_if_missing no-such-package no-such-command"
expect "no apt-get: a skip" [ "$CODE" = 0 ]
expect "no apt-get: the skip says why" has "apt: SKIPPED: no no-such-command, and "
log "PASSED"
