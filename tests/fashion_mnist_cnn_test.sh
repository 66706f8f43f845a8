#!/bin/bash
# Issue 33's bar for the native workers: the convolutional network of
# config/jobs/fashion_mnist_cnn.json (two convolutions, two max poolings, a dense layer and
# dropout) on Debian's dataset-fashion-mnist, 10 epochs, trained by 4 ps_worker processes on 2
# ps in SYNC (momentum 0.9, alpha0 0.05 halved every 1,500 steps), and the same network in
# ASYNC with the staleness-scaled rate alpha0/tau (config/jobs/fashion_mnist_cnn_async.json:
# plain SGD, alpha0 0.25 halved every 6,000 updates, the same number of passes over the data as
# SYNC's decay since every worker's gradient is an update; the rates chosen on the validation
# split, docs/EXPERIMENTS.md's main table). The final test accuracy (of the model saved in
# params/, evaluated once every worker has left, the test set's only evaluation) must reach 90%
# in SYNC, and ASYNC must come within a point of SYNC.
#
# At CI's size (the default) both train EPOCHS=2 of the 10 epochs, the decays scaled to match,
# and the bars are 86.5% and 3.5 points (measured 2026-11-29 in CI's build: 87.9% and 86.5%, 91 s
# and 78 s; in a later CI run 88.1% and 86.0%, a gap of 2.1 points: two epochs of ASYNC with
# staleness 3 vary by more than the full run's point; at 3 epochs 89.0% and 87.6%, 127 s and
# 122 s). FULL=1
# runs the jobs as shipped with the issue's bars (measured: 90.9% and 90.1%, about 100 s a
# mode on 2 cores; docs/EXPERIMENTS.md has the figures over seeds).
#
# Installs dataset-fashion-mnist when missing (root and apt-get needed); skips, saying why,
# where it cannot be had.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

make_work_dir fashion_mnist_cnn
need_fashion_mnist
LOG_FILES=("$DIR/*.log")
if [ "${FULL:-0}" = 1 ]; then
  readonly EPOCHS=0 SYNC_BAR=0.90 ASYNC_GAP=0.01
else
  readonly EPOCHS=2 SYNC_BAR=0.865 ASYNC_GAP=0.035
fi

# MODE's shipped job (at CI's size with fewer epochs, the decay scaled to match).
for mode in SYNC ASYNC; do
  job="$RUNFILES/config/jobs/fashion_mnist_cnn.json"
  [ "$mode" = ASYNC ] && job="$RUNFILES/config/jobs/fashion_mnist_cnn_async.json"
  /usr/bin/python3 - "$job" "$EPOCHS" > "$DIR/$mode.json" <<'PY'
import json, sys
job, epochs = json.load(open(sys.argv[1])), int(sys.argv[2])
if epochs:
    rate = job["learning_rate"]
    rate["decay_steps"] = rate["decay_steps"] * epochs // job["epochs"]
    job["epochs"] = epochs
print(json.dumps(job))
PY
  start=$(date +%s)
  "$PSCTL" local --ps_server_binary="$PS_SERVER" --ps_worker_binary="$PS_WORKER" \
    --job="$DIR/$mode.json" --workers=4 --ps=2 --device=cpu --results="$DIR/$mode" \
    > "$DIR/$mode.log" 2>&1 || fail "psctl local of the $mode job failed"
  grep -q '"state": "DONE"' "$DIR/$mode/summary.json" || fail "the $mode job did not end DONE"
  log "$mode: $(( $(date +%s) - start )) s"
done

/usr/bin/python3 - "$DIR" "$SYNC_BAR" "$ASYNC_GAP" <<'PY' || fail "below the bar"
import json, sys
results, bar, gap = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
accuracy = {m: json.load(open(f"{results}/{m}/summary.json"))["final_eval_accuracy"]
            for m in ("SYNC", "ASYNC")}
print(f"final test accuracy: SYNC {accuracy['SYNC']:.4f}, ASYNC {accuracy['ASYNC']:.4f}; "
      f"bars: SYNC >= {bar}, ASYNC >= SYNC - {gap}")
if accuracy["SYNC"] < bar:
    sys.exit(f"SYNC reached {accuracy['SYNC']:.4f}, under {bar}")
if accuracy["ASYNC"] < accuracy["SYNC"] - gap:
    sys.exit(f"ASYNC reached {accuracy['ASYNC']:.4f}, more than {gap} under SYNC")
PY
log "PASSED: the CNN reached the bars in SYNC and ASYNC"
