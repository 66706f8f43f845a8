#!/bin/bash
# A real Slurm on this one machine runs deploy/slurm/ps_job.sbatch with 2 ps and 2 workers.
#
# Installs Debian's slurm-wlm and munge when missing (apt-get, with services kept from
# starting), then starts, in a private directory, munged with a fresh key, slurmctld and slurmd
# with a minimal slurm.conf: one node, this host, claiming max(nproc, 4) CPUs so that 4 tasks
# fit on 2 cores. It submits `sbatch --ntasks=4 ps_job.sbatch` with PS_NUM_PS=2 and checks:
# the job COMPLETED; the results' summary.json says DONE after 300 steps at accuracy >= 0.9;
# psctl slurm-spec printed the expected cluster; every rank logged the task and the cluster
# --cluster_resolver=slurm gave it (rank 0 ps:0, 1 ps:1, 2 worker:0, 3 worker:1, on consecutive
# ports of this node); and every daemon stopped cleanly. Then the same script runs a program job
# (the NumPy example on workers with --allow_programs) to DONE. Everything it started is stopped by
# pid on every exit, and no process it started may be left.
#
# Skips (passes), saying why, where it cannot run: not root, no Slurm and apt-get cannot
# install it, no resolvable host name, or Slurm's daemons do not come up here.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

readonly DEPLOY_DIR="$RUNFILES/deploy/slurm"
readonly JOB_WAIT_S=180
# Every process this test starts, and every one Slurm starts for it, carries this variable.
export PS_SLURM_TEST_TAG="ps-slurm-test-$$-$RANDOM"
export PATH="$PATH:/usr/sbin:/sbin"
DIR=""
DAEMON_PIDS=()          # munged, slurmctld, slurmd: stopped in reverse order.
JOB_ID=""
LOG_LINES=25

# The processes carrying our tag, but for this shell and its children (this function's
# subshell among them).
tagged_pids() {
  local pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    if [ "$pid" = "$$" ] || [ "$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ')" = "$$" ]; then
      continue
    fi
    if grep -qz "^PS_SLURM_TEST_TAG=$PS_SLURM_TEST_TAG\$" "$environ" 2>/dev/null; then
      echo "$pid"
    fi
  done
}

# Whether Slurm has no job JOB_ID (any more).
job_gone() { [ -z "$(squeue --noheader --jobs="$JOB_ID" 2>/dev/null)" ]; }

cleanup() {
  if [ -n "$JOB_ID" ] && [ "${#DAEMON_PIDS[@]}" -gt 0 ]; then
    scancel "$JOB_ID" 2>/dev/null
    WAIT_INTERVAL_S=0.5 wait_until 30 job_gone
  fi
  stop_pids 10 "${DAEMON_PIDS[@]}"
  # Anything Slurm started for the job that outlived it (a daemon, a slurmstepd).
  kill_left_behind "$(tagged_pids)" || EXIT_STATUS=1
  if [ -n "$DIR" ]; then
    [ "$EXIT_STATUS" = 0 ] || keep_outputs "$DIR"/*.log "$DIR"/job.out "$DIR"/logs
    rm -rf "$DIR"
  fi
}
on_exit cleanup

# --- Slurm and munge, installed if missing.
[ "$(id -u)" = 0 ] || skip "not root: Slurm's daemons run as root here, and installing them needs root"
apt_install_if_missing "slurm-wlm munge" munged slurmctld slurmd sbatch srun squeue scontrol \
  scancel sinfo

# --- The node: this host, by a name that resolves (the ClusterSpec dials it).
NODE=$(hostname -s)
ADDRESS=$(getent hosts "$NODE" | awk '{ print $1; exit }') || true
[ -n "$ADDRESS" ] || skip "this host's name \"$NODE\" does not resolve (getent hosts), and the daemons' ClusterSpec dials it"

# Unix socket paths (munge's, slurmstepd's in the spool) must stay short: TEST_TMPDIR may be
# too deep for them.
if [ -n "${TEST_TMPDIR:-}" ] && [ "${#TEST_TMPDIR}" -lt 60 ]; then
  DIR=$(mktemp -d "$TEST_TMPDIR/slurm.XXXXXX")
else
  DIR=$(mktemp -d /tmp/ps-slurm.XXXXXX)
fi
chmod 711 "$DIR"  # munged wants its socket reachable.
mkdir -p "$DIR/state" "$DIR/spool" "$DIR/logs"
LOG_FILES=("$DIR/*.log" "$DIR/job.out" "$DIR/logs/*.log")

# Free TCP ports: nothing listens on them (ports below Linux's ephemeral range).
port_free() {
  ! (exec 3<> "/dev/tcp/127.0.0.1/$1") 2>/dev/null && ! (exec 3<> "/dev/tcp/$ADDRESS/$1") 2>/dev/null
}
free_ports() {  # COUNT: the first of COUNT consecutive free ports.
  for _ in $(seq 50); do
    local first=$((20000 + RANDOM % 12000)) ok=1
    for ((p = first; p < first + $1; p++)); do port_free "$p" || { ok=0; break; }; done
    if ((ok)); then
      echo "$first"
      return
    fi
  done
  fail "no $1 free consecutive ports"
}
CTLD_PORT=$(free_ports 2)      # slurmctld and slurmd.
BASE_PORT=$(free_ports 4)      # The job's 4 tasks on this one node.
CPUS=$(nproc)
((CPUS >= 4)) || CPUS=4

# --- munged with a fresh key.
dd if=/dev/urandom of="$DIR/munge.key" bs=1024 count=1 status=none
chmod 400 "$DIR/munge.key"
munged --foreground --force --socket="$DIR/munge.socket" --key-file="$DIR/munge.key" \
  --pid-file="$DIR/munged.pid" --log-file="$DIR/munged.log" --seed-file="$DIR/munged.seed" \
  > "$DIR/munged.out.log" 2>&1 &
DAEMON_PIDS+=($!)
wait_until 10 test -S "$DIR/munge.socket" ||
  skip "munged does not start here: $(tail -n 3 "$DIR/munged.out.log" | tr '\n' ' ')"

# --- slurmctld and slurmd.
export SLURM_CONF="$DIR/slurm.conf"
: > "$DIR/plugstack.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=pstest
SlurmctldHost=$NODE
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
PlugStackConfig=$DIR/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# This node claims more CPUs than it may have, so that 4 tasks fit on it.
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
NodeName=$NODE CPUs=$CPUS State=UNKNOWN
PartitionName=pstest Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i > "$DIR/slurmctld.out.log" 2>&1 &
DAEMON_PIDS+=($!)
slurmd -D -N "$NODE" > "$DIR/slurmd.out.log" 2>&1 &
DAEMON_PIDS+=($!)
# Whether sinfo says the node is idle (its state in `state`).
node_idle() {
  state=$(sinfo --noheader --nodes="$NODE" --format=%T 2>/dev/null || true)
  [ "$state" = idle ]
}
if ! WAIT_INTERVAL_S=1 wait_until 60 node_idle; then
  show_logs
  skip "Slurm's daemons did not bring node $NODE up within 60 s (sinfo: \"$state\"; logs above)"
fi
log "Slurm $(sinfo --version | awk '{ print $2 }') up: node $NODE ($ADDRESS), $CPUS CPUs; state in $DIR"

# --- The job: 2 ps and 2 workers, as 4 tasks on this node.
cat > "$DIR/job.json" <<EOF
{"job_id": "slurm",
 "model": {"kind": "SOFTMAX_REGRESSION"},
 "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 4000, "feature_dim": 16,
                        "num_classes": 4},
          "test_fraction": 0.2},
 "learning_rate": {"base": 0.2},
 "consistency": {"mode": "SYNC"},
 "batch_size": 32, "steps": 300, "eval_interval": 100, "seed": 9, "min_slice_bytes": 64,
 "time_limit_s": 120}
EOF
# run_sbatch NAME RESULTS LOG_DIR WORKER_FLAGS: submits ps_job.sbatch with DIR/NAME.json as 4
# tasks (2 ps) on this node, waits for it to end and shows its output (DIR/NAME.out); sets
# JOB_ID, job_state and exit_code. The ps package is on the tasks' PYTHONPATH (sbatch passes
# the environment on) for program jobs.
run_sbatch() {
  local start=$SECONDS
  JOB_ID=$(PYTHONPATH="$RUNFILES/python/ps/site" PS_NUM_PS=2 PS_BASE_PORT=$BASE_PORT \
           PS_BIN_DIR=$RUNFILES PS_DEPLOY_DIR=$DEPLOY_DIR PS_LOG_DIR="$3" \
           PS_SERVER_FLAGS="--bind_host=$ADDRESS --insecure" \
           PS_WORKER_FLAGS="--bind_host=$ADDRESS --insecure --device=cpu $4" \
           sbatch --parsable --ntasks=4 --chdir="$DIR" --output="$DIR/$1.out" \
             --time=10 "$DEPLOY_DIR/ps_job.sbatch" "$DIR/$1.json" "$2")
  log "submitted job $JOB_ID ($1.json: ps_job.sbatch, --ntasks=4, PS_NUM_PS=2, ports" \
      "$BASE_PORT-$((BASE_PORT + 3)))"
  WAIT_INTERVAL_S=1 wait_until "$JOB_WAIT_S" job_gone ||
    fail "job $JOB_ID still running after ${JOB_WAIT_S}s"
  job_state=$(scontrol show job "$JOB_ID" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  exit_code=$(scontrol show job "$JOB_ID" | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')
  log "job $JOB_ID ended $job_state (exit $exit_code) after $((SECONDS - start))s"
  cat "$DIR/$1.out"
}

run_sbatch job "$DIR/results" "$DIR/logs" --compute_threads=1

# --- Its results.
if [ "$job_state" != COMPLETED ] || [ "$exit_code" != 0:0 ]; then
  fail "job $JOB_ID ended $job_state with exit code $exit_code"
fi
summary="$DIR/results/summary.json"
[ -f "$summary" ] || fail "no $summary"
grep -q '"state": "DONE"' "$summary" || fail "the job did not finish: $(grep '"state"' "$summary")"
grep -q '"steps": 300,' "$summary" || fail "the job did not run 300 steps"
accuracy=$(sed -n 's/.*"final_eval_accuracy": \([0-9.eE+-]*\).*/\1/p' "$summary")
awk -v accuracy="$accuracy" 'BEGIN { exit !(accuracy >= 0.9) }' ||
  fail "final_eval_accuracy \"$accuracy\" is below 0.9"

# --- What the resolver gave psctl and each daemon.
ps=("$NODE:$BASE_PORT" "$NODE:$((BASE_PORT + 1))")
workers=("$NODE:$((BASE_PORT + 2))" "$NODE:$((BASE_PORT + 3))")
cluster="{\"cluster\":{\"ps\":[\"${ps[0]}\",\"${ps[1]}\"],\"worker\":[\"${workers[0]}\",\"${workers[1]}\"]}}"
spec=$(tr -d ' \n' < "$DIR/logs/cluster.json")
[ "$spec" = "$cluster" ] || fail "psctl slurm-spec printed $spec, not $cluster"
tasks=(ps:0 ps:1 worker:0 worker:1)
for rank in 0 1 2 3; do
  task_log="$DIR/logs/task-$rank.log"
  expected="${tasks[rank]} (Slurm rank $rank of 4 on $NODE, local task $rank; SLURM_STEP_NODELIST=$NODE, SLURM_STEP_TASKS_PER_NODE=4, --slurm_num_ps=2, --slurm_base_port=$BASE_PORT) of cluster $cluster"
  grep -qF "$expected" "$task_log" || fail "rank $rank did not log \"$expected\""
  grep -q "] stopped$" "$task_log" || fail "rank $rank (${tasks[rank]}) did not stop cleanly"
done
log "2 ps and 2 workers under Slurm resolved $cluster and trained to test accuracy $accuracy"

# --- A program job (issue 32): the same script, the workers with --allow_programs, each
# running the NumPy example through the ps package (PYTHONPATH, passed on by sbatch).
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  cat > "$DIR/program.json" <<JSON
{"job_id": "slurm_program",
 "program": {"argv": ["/usr/bin/python3", "$RUNFILES/examples/numpy/linear_regression.py"]},
 "learning_rate": {"base": 0.05}, "consistency": {"mode": "SSP", "ssp_bound": 2},
 "batch_size": 32, "steps": 200, "seed": 4}
JSON
  run_sbatch program "$DIR/program_results" "$DIR/program_logs" --allow_programs
  [ "$job_state" = COMPLETED ] || fail "program job $JOB_ID ended $job_state"
  grep -q '"state": "DONE"' "$DIR/program_results/summary.json" ||
    fail "the program job did not end DONE: $(cat "$DIR/program_results/summary.json")"
  log "the NumPy program job ran to DONE under Slurm"
else
  log "no program job: Debian's python3 cannot import numpy"
fi
log "PASSED: 2 ps and 2 workers under Slurm resolved $cluster and trained to test accuracy $accuracy"
