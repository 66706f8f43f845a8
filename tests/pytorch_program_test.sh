#!/bin/bash
# PyTorch workers as a job's program (issue 32): `psctl local` runs a program job
# (JobSpec.program: examples/pytorch/mlp_synthetic.py through python/ps) on 2 ps and 2 real
# ps_worker daemons under the local cluster's mutual TLS, and collects its results as a native
# job's (summary.json DONE, eval.csv, staleness.csv, params/ named by the module's parameters).
# Then the faults a native job survives: kill -9 of one worker's program in ASYNC (the worker is
# lost, started again as its next incarnation, and the job ends DONE), and kill -9 of a ps in
# SYNC (recovery from the latest checkpoint; the programs start again at its step; DONE).
#
# Skips, saying why, where Debian's PyTorch is missing and cannot be installed.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

make_work_dir pytorch_program
make_ps_python
readonly EXAMPLE="$RUNFILES/examples/pytorch/mlp_synthetic.py"
LOG_FILES=("$DIR/sync.log" "$DIR/async.log" "$DIR/recovery.log")

# job FILE ID MODE STEPS [EXTRA_JSON]: a program job of the example.
job() {
  cat > "$1" <<JSON
{
  "job_id": "$2",
  "program": {"argv": ["$PS_PYTHON", "$EXAMPLE", "--tag=$2-$$"]},
  "learning_rate": {"base": 0.1},
  "consistency": {"mode": "$3"},
  "batch_size": 32,
  "steps": $4,
  "eval_interval": 50,
  "seed": 3${5:+,
  $5}
}
JSON
}

# --- SYNC: DONE, with the results a native job has.
job "$DIR/sync.json" py_sync SYNC 150
"$PSCTL" local --ps_server_binary="$PS_SERVER" --ps_worker_binary="$PS_WORKER" \
  --job="$DIR/sync.json" --results="$DIR/sync" > "$DIR/sync.log" 2>&1 ||
  fail "psctl local of the SYNC program job failed"
grep -q '"state": "DONE"' "$DIR/sync/summary.json" || fail "the SYNC job did not end DONE"
grep -q '"steps": 150' "$DIR/sync/summary.json" || fail "the SYNC job did not run 150 steps"
[ "$(tail -n +2 "$DIR/sync/eval.csv" | wc -l)" -ge 3 ] ||
  fail "eval.csv has fewer than 3 evaluations (every 50 steps)"
for name in 0.weight 0.bias 2.weight 2.bias; do
  [ -f "$DIR/sync/params/$name.npy" ] || fail "params/ has no $name.npy (the module's names)"
done
accuracy=$(sed -n 's/.*"final_eval_accuracy": \([0-9.]*\).*/\1/p' "$DIR/sync/summary.json")
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.5) }' ||
  fail "final accuracy $accuracy is no better than a guess among 4 classes"
# The program's pulls and pushes are counted as a native worker's: a step moves the model (its
# parameters' bytes and more) each way.
parameters=$(/usr/bin/python3 -c "import glob, numpy as np; print(sum(np.load(f).size for f in glob.glob('$DIR/sync/params/*.npy')))")
for direction in sent received; do
  per_step=$(sed -n "s/.*\"bytes_${direction}_per_step\": \([0-9.e+]*\).*/\1/p" "$DIR/sync/summary.json")
  awk -v b="$per_step" -v p="$parameters" 'BEGIN { exit !(b >= 4 * p) }' ||
    fail "bytes_${direction}_per_step is $per_step, under the model's $((4 * parameters)) bytes"
done
log "SYNC: DONE, final accuracy $accuracy"

# --- ASYNC: kill -9 of worker 1's program; it is started again and the job ends DONE.
job "$DIR/async.json" py_async ASYNC 4000 '"worker_lease_s": 30'
start_psctl_local "$DIR/async.log" --job="$DIR/async.json" --results="$DIR/async"
program_pid() {  # The program of worker $1 (its argv holds this test's tag).
  local pid
  for pid in $(pgrep -f -- "--tag=py_async-$$" || true); do
    grep -qz '^PS_WORKER='"$1"'$' "/proc/$pid/environ" 2>/dev/null && { echo "$pid"; return 0; }
  done
  return 1
}
some_steps() { grep -q 'step [1-9][0-9]*/4000' "$DIR/async.log"; }
wait_while_running "$PSCTL_LOCAL_PID" "psctl local" 120 some_steps ||
  fail "the ASYNC job made no step within 120 s"
victim=$(program_pid 1) || fail "found no program of worker 1"
kill -9 "$victim"
log "killed worker 1's program (pid $victim)"
wait_psctl_local_done "the program was killed"
grep -q '"state": "DONE"' "$DIR/async/summary.json" || fail "the ASYNC job did not end DONE"
grep -q 'worker_lost,worker:1' "$DIR/async/events.csv" || fail "no worker_lost event for worker 1"
grep -q 'worker_rejoined,worker:1' "$DIR/async/events.csv" || fail "worker 1 did not rejoin"
grep -q 'was killed by signal 9' "$DIR/async/events.csv" ||
  fail "the lost worker's event does not say its program was killed"
log "ASYNC: worker 1's program killed, started again, DONE"

# --- SYNC with checkpoints: kill -9 of ps:1; recovery from the checkpoint; DONE.
job "$DIR/recovery.json" py_recovery SYNC 3000 '"checkpoint": {"every_steps": 100}'
start_psctl_local "$DIR/recovery.log" --job="$DIR/recovery.json" --results="$DIR/recovery" \
  --checkpoint_dir="$DIR/checkpoints"
checkpointed() { grep -q ',checkpoint_complete,' "$DIR/recovery/events.csv" 2>/dev/null; }
wait_while_running "$PSCTL_LOCAL_PID" "psctl local" 120 checkpointed ||
  fail "no checkpoint within 120 s"
ps1=""
for pid in $(pgrep -f -- "--task=ps:1" || true); do  # This cluster's ps:1, by its ClusterSpec.
  if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null |
       grep -qF -- "--cluster_spec=$CLUSTER_SPEC"; then
    ps1=$pid
  fi
done
[ -n "$ps1" ] || fail "found no ps:1 of this cluster"
kill -9 "$ps1"
log "killed ps:1 (pid $ps1)"
wait_psctl_local_done "ps:1 was killed"
grep -q '"state": "DONE"' "$DIR/recovery/summary.json" || fail "the job did not end DONE"
grep -q '^[0-9.]*,recovered,' "$DIR/recovery/events.csv" || fail "no recovery in events.csv"
log "SYNC: ps:1 killed, recovered from a checkpoint, DONE"
# (A daemon without --allow_programs refuses a program job: worker/worker_service_test.)
log "PASSED"
