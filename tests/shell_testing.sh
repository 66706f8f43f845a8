# What the shell tests in tests/ share, sourced by each (bash only): messages, skipping and
# failing with logs, stopping processes, waiting with a deadline, installing a Debian package,
# and a local cluster from `psctl local`. A test lists this file in its sh_test's `data` and,
# right after `set -euo pipefail`, sources it from the runfiles tree, in which Bazel runs tests:
#   source "$PWD/tests/shell_testing.sh"
# Sourcing only defines the names below: no trap, no process, no shell option changed.
#
# Globals a test may set: LOG_FILES, LOG_LINES (what a failure shows), WAIT_INTERVAL_S (how
# often wait_until tries). Globals set here: TEST_NAME, RUNFILES, PSCTL, PS_SERVER, PS_WORKER;
# DIR (make_work_dir);
# EXIT_STATUS (in on_exit's cleanup), STOPPED (stop_pid), PSCTL_LOCAL_PID and CLUSTER_SPEC
# (start_psctl_local), PS_PYTHON (make_ps_python), NPM_PACKAGES (need_npm_packages).

# The test's name, its file's without ".sh": every message starts with it.
TEST_NAME=${0##*/}
readonly TEST_NAME=${TEST_NAME%.sh}
# The runfiles tree and this build's programs in it (present where the test's `data` lists
# //ctl:psctl, //server:ps_server and //worker:ps_worker).
readonly RUNFILES="$PWD"
readonly PSCTL="$RUNFILES/ctl/psctl"
readonly PS_SERVER="$RUNFILES/server/ps_server"
readonly PS_WORKER="$RUNFILES/worker/ps_worker"

# --- Messages, skips and failures.

# log MESSAGE...: prints "TEST_NAME: MESSAGE" on stdout.
log() { echo "$TEST_NAME: $*"; }

# skip REASON: logs "SKIPPED: REASON" and exits 0 (the test passes, saying why it could not run).
skip() {
  log "SKIPPED: $*"
  exit 0
}

# Glob patterns (quoted, expanded when shown) of the files whose last LOG_LINES lines a failure
# shows, e.g. LOG_FILES=("$DIR/*.log").
LOG_FILES=()
LOG_LINES=20

# show_logs: prints "== FILE" and the last LOG_LINES lines of each file matching LOG_FILES.
# Always returns 0.
show_logs() {
  local pattern file
  for pattern in "${LOG_FILES[@]}"; do
    while IFS= read -r file; do
      [ -f "$file" ] || continue
      echo "== $file"
      tail -n "$LOG_LINES" "$file"
    done < <(compgen -G "$pattern" || true)
  done
  return 0
}

# fail REASON: logs "FAILED: REASON", shows the logs (show_logs) and exits 1.
fail() {
  log "FAILED: $*"
  show_logs
  exit 1
}

# keep_outputs PATH...: copies each PATH (a file or a folder) that exists into the test's
# undeclared outputs (bazel-testlogs/.../test.outputs/), where Bazel gives it; does nothing
# outside Bazel. Always returns 0.
keep_outputs() {
  [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ] || return 0
  local path
  for path in "$@"; do
    [ -e "$path" ] && cp -r "$path" "$TEST_UNDECLARED_OUTPUTS_DIR"/
  done
  return 0
}

# --- Exit.

_CLEANUP=""
_CLEANUP_SHELL=""  # The shell (BASHPID) that called on_exit.
_POLICY_RC_D=""  # The policy-rc.d that apt_install_if_missing wrote, while apt-get runs.

# on_exit CLEANUP: on every exit from now on (passing, failing, skipping, a signal), with
# errexit off and the ERR trap removed, runs the function CLEANUP, removes what this library
# left (apt_install_if_missing's policy-rc.d), and exits with EXIT_STATUS: the test's exit
# status, which CLEANUP may change (to fail a test that left processes behind). Also, under
# set -e, a failing command logs "FAILED: line N: COMMAND" and shows the logs before the exit.
# Only the shell that called on_exit runs CLEANUP: not its subshells, nor a child started with
# & and signalled before it became its program (bash runs the EXIT trap there too). Call it
# once, in the test's main shell, before starting anything.
on_exit() {
  _CLEANUP=$1
  _CLEANUP_SHELL=$BASHPID
  trap _exit_trap EXIT
  trap 'log "FAILED: line $LINENO: $BASH_COMMAND"; show_logs' ERR
}
# make_work_dir NAME: makes a fresh directory for the test's files, TEST_TMPDIR/NAME.XXXXXX
# (/tmp without TEST_TMPDIR), sets DIR to it, and on every exit (on_exit) stops the `psctl local`
# that start_psctl_local started, if any, and removes DIR. Call it instead of on_exit.
DIR=""
make_work_dir() {
  DIR=$(mktemp -d "${TEST_TMPDIR:-/tmp}/$1.XXXXXX")
  on_exit _remove_work_dir
}
_remove_work_dir() {
  [ -n "$PSCTL_LOCAL_PID" ] && stop_pid "$PSCTL_LOCAL_PID" 30
  rm -rf "$DIR"
}
_exit_trap() {
  EXIT_STATUS=$?
  [ "$BASHPID" = "$_CLEANUP_SHELL" ] || return "$EXIT_STATUS"
  set +e
  trap - ERR
  "$_CLEANUP"
  [ -n "$_POLICY_RC_D" ] && rm -f "$_POLICY_RC_D"
  exit "$EXIT_STATUS"
}

# --- Processes.

# running PID: whether process PID runs (exists, and is not a zombie waiting to be reaped).
running() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ "$state" != Z* ]]
}

# terminate PID GRACE_S: SIGTERM to process PID (any, a child of this shell or not), SIGKILL
# when it still runs GRACE_S (whole) seconds later. Returns 0 when it ended on SIGTERM (or had
# already ended), 1 when it had to be killed. Reaps nothing.
terminate() {
  local pid=$1 grace_s=$2
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq $((grace_s * 10))); do
    running "$pid" || return 0
    sleep 0.1
  done
  running "$pid" || return 0
  kill -KILL "$pid" 2>/dev/null || true
  return 1
}

# stop_pid PID GRACE_S: terminate PID, a child of this shell (started with &), and reap it.
# Sets STOPPED to how it ended: its exit status, or "killed" when SIGTERM did not end it within
# GRACE_S seconds. Always returns 0.
STOPPED=""
# shellcheck disable=SC2034  # STOPPED: read by the tests.
stop_pid() {
  local pid=$1 grace_s=$2
  if ! terminate "$pid" "$grace_s"; then
    wait "$pid" 2>/dev/null || true
    STOPPED=killed
    return 0
  fi
  STOPPED=0
  wait "$pid" 2>/dev/null || STOPPED=$?
}

# stop_pids GRACE_S PID...: stop_pid on each PID, the last first (the reverse of the order
# they were started in). Always returns 0.
stop_pids() {
  local grace_s=$1 i
  shift
  local pids=("$@")
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop_pid "${pids[i]}" "$grace_s"; done
}

# kill_left_behind PIDS: where PIDS (pids separated by white space) is not empty, logs them
# with their command lines ("processes left behind, killed: ..."), kills them (SIGKILL) and
# returns 1; returns 0 where it is empty.
kill_left_behind() {
  local pids=() pid listing
  read -r -d '' -a pids <<< "$1" || true
  ((${#pids[@]} > 0)) || return 0
  listing=$(ps -o pid=,args= -p "$(IFS=,; echo "${pids[*]}")" || true)
  log "processes left behind, killed: ${listing//$'\n'/;}"
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  return 1
}

# --- Waiting.

# How often wait_until runs its command, in seconds (a test may set it, or prefix a call:
# WAIT_INTERVAL_S=1 wait_until ...).
WAIT_INTERVAL_S=0.1

# wait_until SECONDS COMMAND [ARG...]: runs COMMAND (a program or a function; errexit does not
# apply inside it) every WAIT_INTERVAL_S seconds until it succeeds: returns 0; returns 1 when
# it still fails once SECONDS (whole) seconds of wall time have passed.
wait_until() {
  local deadline_us=$(($(_now_us) + $1 * 1000000))
  shift
  until "$@"; do
    (($(_now_us) < deadline_us)) || return 1
    sleep "$WAIT_INTERVAL_S"
  done
}
_now_us() { echo "${EPOCHREALTIME//[.,]/}"; }

# wait_while_running PID NAME SECONDS COMMAND [ARG...]: wait_until, but fails the test
# ("NAME (pid PID) exited") as soon as process PID has ended with COMMAND still failing.
wait_while_running() {
  local pid=$1 name=$2 seconds=$3
  shift 3
  wait_until "$seconds" _succeeds_or_fail_if_ended "$pid" "$name" "$@"
}
_succeeds_or_fail_if_ended() {
  local pid=$1 name=$2
  shift 2
  "$@" && return 0
  running "$pid" && return 1
  "$@" && return 0  # What it did just before it ended.
  fail "$name (pid $pid) exited"
}

# --- Debian packages.

# apt_install_if_missing "PACKAGE..." COMMAND...: where a COMMAND is not on PATH, installs the
# PACKAGEs (one argument, names separated by spaces) with apt-get, without recommends and with
# services kept from starting (a policy-rc.d while it runs, where there is none), in 600 s at
# most. Skips the test (skip), saying why, where it cannot: not root, no apt-get, apt-get
# fails, or a COMMAND still missing after. Returns 0 with every COMMAND there. Call on_exit
# first: a signal during apt-get then still removes the policy-rc.d.
apt_install_if_missing() {
  local packages=$1 missing output status=0
  shift
  missing=$(_missing_commands "$@")
  [ -n "$missing" ] || return 0
  [ "$(id -u)" = 0 ] || skip "no $missing, and installing $packages needs root"
  command -v apt-get >/dev/null || skip "no $missing, and no apt-get to install $packages"
  log "installing $packages (missing: $missing)"
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    _POLICY_RC_D=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$_POLICY_RC_D"
    chmod +x "$_POLICY_RC_D"
  fi
  # shellcheck disable=SC2086  # $packages: names, split on purpose.
  output=$(DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y \
             --no-install-recommends $packages 2>&1) || status=$?
  if [ -n "$_POLICY_RC_D" ]; then
    rm -f "$_POLICY_RC_D"
    _POLICY_RC_D=""
  fi
  ((status == 0)) ||
    skip "apt-get cannot install $packages: $(tail -n 3 <<< "$output" | tr '\n' ' ')"
  missing=$(_missing_commands "$@")
  [ -z "$missing" ] || skip "installed $packages, but $missing is still missing"
}
# need_fashion_mnist: Debian's dataset-fashion-mnist in FASHION_MNIST (its directory), installed
# with apt-get where missing; skips the test, saying why, where it cannot be had.
readonly FASHION_MNIST=/usr/share/datasets/fashion-mnist
need_fashion_mnist() {
  [ -f "$FASHION_MNIST/train-images-idx3-ubyte.gz" ] && return 0
  [ "$(id -u)" = 0 ] || skip "no $FASHION_MNIST, and installing dataset-fashion-mnist needs root"
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq dataset-fashion-mnist \
    > /dev/null 2>&1 || skip "apt-get cannot install dataset-fashion-mnist"
}
# need_npm_packages PACKAGE@VERSION...: the pinned npm packages installed once into a cache
# outside the repository, NPM_PACKAGES (its directory: node_modules/, node_modules/.bin/),
# shared by the tests that use the same list ($PS_NPM_CACHE, default /tmp/ps-npm-$UID, one
# directory per list, mode 700: the test fails where another user made or may write it).
# Skips the test, saying why, where node, npm or the registry is missing.
need_npm_packages() {
  local root="${PS_NPM_CACHE:-/tmp/ps-npm-$(id -u)}" staging status=0 output
  command -v node >/dev/null && command -v npm >/dev/null ||
    skip "node or npm is not installed (apt-get install nodejs npm)"
  NPM_PACKAGES="$root/$(tr ' /' '+_' <<<"$*")"
  # Its programs run as this user (root, for some tests): only a cache this user made, that no
  # one else may write, is used.
  mkdir -p -m 700 "$root"
  local owner mode
  read -r owner mode < <(stat -c '%u %a' "$root")
  if [[ "$owner" != "$(id -u)" ]] || (( 8#$mode & 8#022 )); then
    fail "the npm cache $root is not this user's alone (owner $(stat -c %U "$root"), mode" \
      "$mode): remove it, or set PS_NPM_CACHE to a directory of yours"
  fi
  chmod 700 "$root"
  [ -e "$NPM_PACKAGES/.installed" ] && return 0
  log "installing $* into $NPM_PACKAGES"
  staging="$(mktemp -d "$root/staging.XXXXXX")"
  # Bazel runs tests with HOME elsewhere, so the user's npmrc is not read: trust the system's
  # CAs (a proxy that re-signs TLS is in them) unless npm_config_cafile says otherwise.
  if [[ -z "${npm_config_cafile:-}" && -r /etc/ssl/certs/ca-certificates.crt ]]; then
    export npm_config_cafile=/etc/ssl/certs/ca-certificates.crt
  fi
  output=$(timeout 600 npm install --prefix "$staging" --cache "$staging/.npm" --no-audit \
             --no-fund "$@" 2>&1) || status=$?
  if ((status != 0)); then
    rm -rf "$staging"
    skip "npm cannot install $* (no registry?): $(tail -n 5 <<<"$output")"
  fi
  rm -rf "$staging/.npm" "$NPM_PACKAGES" && mv "$staging" "$NPM_PACKAGES" &&
    touch "$NPM_PACKAGES/.installed"
}
# The COMMANDs not on PATH, separated by spaces.
_missing_commands() {
  local command missing=()
  for command in "$@"; do command -v "$command" >/dev/null || missing+=("$command"); done
  echo "${missing[*]}"
}

# --- A local cluster.

# start_psctl_local LOG_FILE FLAG...: starts `psctl local FLAG...` in the background with this
# build's ps_server and ps_worker, stdout and stderr to LOG_FILE, and waits (60 s at most) until
# its cluster is up: psctl local prints "cluster: PATH". Sets PSCTL_LOCAL_PID and CLUSTER_SPEC
# (PATH, the cluster's ClusterSpec). Fails the test where psctl local exits first or the
# cluster is not up within 60 s. SIGTERM (stop_pid) stops its job (exit status 130) and daemons.
PSCTL_LOCAL_PID=""
CLUSTER_SPEC=""
start_psctl_local() {
  local log_file=$1
  shift
  "$PSCTL" local --ps_server_binary="$PS_SERVER" --ps_worker_binary="$PS_WORKER" "$@" \
    > "$log_file" 2>&1 &
  PSCTL_LOCAL_PID=$!
  wait_while_running "$PSCTL_LOCAL_PID" "psctl local" 60 _cluster_printed "$log_file" ||
    fail "psctl local's cluster did not come up within 60 s"
}
# Whether LOG_FILE has psctl local's "cluster: PATH" yet; sets CLUSTER_SPEC to PATH.
_cluster_printed() {
  CLUSTER_SPEC=$(sed -n 's/^cluster: //p' "$1" 2>/dev/null || true)
  [ -n "$CLUSTER_SPEC" ]
}

# --- Python workers.

# make_ps_python: writes DIR/ps_python, Debian's Python 3 with this build's ps package on its
# path (as tools/ps_python does; the test's `data` lists //python/ps), for a program job's argv,
# and sets PS_PYTHON to it. Skips the test where that Python cannot import torch and numpy.
PS_PYTHON=""
make_ps_python() {
  /usr/bin/python3 -c "import torch, numpy" 2>/dev/null ||
    skip "/usr/bin/python3 cannot import torch and numpy (tools/setup.sh installs python3-torch)"
  PS_PYTHON="$DIR/ps_python"
  printf '#!/bin/bash\nexport PYTHONPATH="%s"\nexec /usr/bin/python3 "$@"\n' \
    "$RUNFILES/python/ps/site" > "$PS_PYTHON"
  chmod +x "$PS_PYTHON"
}

# wait_psctl_local_done WHAT: waits for the psctl local that start_psctl_local started to end,
# and fails the test ("psctl local exited N after WHAT") unless it exits 0.
wait_psctl_local_done() {
  local status=0
  wait "$PSCTL_LOCAL_PID" || status=$?
  PSCTL_LOCAL_PID=""
  ((status == 0)) || fail "psctl local exited $status after $1"
}
