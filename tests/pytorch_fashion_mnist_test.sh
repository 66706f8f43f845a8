#!/bin/bash
# The real task of issue 32: a convolutional network (examples/pytorch/fashion_mnist_cnn.py) on
# the 70,000 Fashion-MNIST images of Debian's dataset-fashion-mnist, trained by 4 PyTorch workers
# of a program job on 2 ps, in SYNC (momentum SGD, batches of 4 x 16) and in ASYNC with the
# staleness-scaled rate alpha0/tau (plain SGD, alpha0 halved every 7,500 updates: with momentum
# on the shards, 4 workers' stale gradients diverged), 6 epochs each, from the chief's PyTorch
# initialization. Both must reach 89% test accuracy on the final model (evaluated once every
# worker has pushed its last gradient), and SYNC must be within a point of a single PyTorch
# process trained on the same batches in the same order with torch.optim.SGD
# (examples/pytorch/fashion_mnist_cnn.py --single). That is FULL=1 (bazel test
# --test_env=FULL=1; about 13 minutes on 2 cores).
#
# At CI's size (the default) every run trains EPOCHS=1 of the 6 epochs, ASYNC's decay scaled to
# match, and the bar is 83% for both modes, with SYNC within 2 points of the single process
# trained as long (after one epoch the model is mid-descent and SYNC's sums, in the order the
# pushes came, vary: measured SYNC 87.5% and 86.8% in two runs, ASYNC 84.9%, the single process
# 87.8%, 3 minutes).
#
# Installs dataset-fashion-mnist when missing (root and apt-get needed); skips, saying why,
# where it or PyTorch cannot be had.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

make_work_dir fashion_mnist
make_ps_python
need_fashion_mnist
readonly EXAMPLE="$RUNFILES/examples/pytorch/fashion_mnist_cnn.py"
LOG_FILES=("$DIR/sync.log" "$DIR/async.log" "$DIR/reference.log")
if [ "${FULL:-0}" = 1 ]; then
  readonly EPOCHS=6 BAR=0.89 GAP=0.01
else
  readonly EPOCHS=1 BAR=0.83 GAP=0.02
fi

# job FILE ID OPTIMIZER LEARNING_RATE CONSISTENCY (each JSON): the example's program job.
job() {
  cat > "$1" <<JSON
{
  "job_id": "$2",
  "program": {"argv": ["$PS_PYTHON", "$EXAMPLE"]},
  "optimizer": $3,
  "learning_rate": $4,
  "consistency": $5,
  "batch_size": 16,
  "epochs": $EPOCHS,
  "seed": 1
}
JSON
}
accuracy() { sed -n 's/.*"final_eval_accuracy": \([0-9.]*\).*/\1/p' "$1/summary.json"; }
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

job "$DIR/sync.json" fm_sync '{"kind": "MOMENTUM", "momentum": 0.9}' \
  '{"kind": "CONSTANT", "base": 0.05}' '{"mode": "SYNC"}'
job "$DIR/async.json" fm_async '{"kind": "SGD"}' \
  "{\"kind\": \"STEP_DECAY\", \"base\": 0.1, \"decay_steps\": $((7500 * EPOCHS / 6)), \"decay_factor\": 0.5}" \
  '{"mode": "ASYNC", "staleness_learning_rate": "INVERSE"}'
for mode in sync async; do
  "$PSCTL" local --ps_server_binary="$PS_SERVER" --ps_worker_binary="$PS_WORKER" \
    --job="$DIR/$mode.json" --workers=4 --results="$DIR/$mode" > "$DIR/$mode.log" 2>&1 ||
    fail "psctl local of the $mode job failed"
  grep -q '"state": "DONE"' "$DIR/$mode/summary.json" || fail "the $mode job did not end DONE"
done
/usr/bin/python3 "$EXAMPLE" --single --job="$DIR/sync.json" --workers=4 > "$DIR/reference.log" ||
  fail "the single-process reference failed"
reference=$(sed -n 's/.*"accuracy": \([0-9.]*\).*/\1/p' "$DIR/reference.log")
sync=$(accuracy "$DIR/sync")
async=$(accuracy "$DIR/async")
log "test accuracy: SYNC $sync, ASYNC alpha0/tau $async, single-process PyTorch $reference"
at_least "$sync" "$BAR" || fail "SYNC reached $sync, under $BAR"
# ASYNC's order of pushes is the machine's: with the decaying rate, runs ended at 90.5% and
# 90.7% (bench/RESULTS.md); a constant alpha0 had ended between 88.9% and 90.5%.
at_least "$async" "$BAR" || fail "ASYNC reached $async, under $BAR"
at_least "$sync" "$(awk -v r="$reference" -v g="$GAP" 'BEGIN { print r - g }')" ||
  fail "SYNC's $sync is over $GAP under the single process's $reference"
log "PASSED"
