#!/bin/bash
# The final evaluation is the saved model's (issue 33, section 2): for a small MLP trained by 2
# native workers in SYNC, ASYNC, SSP and ALLREDUCE, the final test loss and accuracy in
# summary.json equal what NumPy computes from the model psctl saved in params/ on the same test
# file: the chief evaluates the shards' values once every worker has left, not the weights it
# held before its last push.
#
# The data: a Gaussian mixture NumPy writes as CSV files (a training file and a test file, read
# whole). Skips where Debian's python3 cannot import numpy.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

make_work_dir final_evaluation
/usr/bin/python3 -c "import numpy" 2>/dev/null || skip "Debian's python3 cannot import numpy"
LOG_FILES=("$DIR/*.log")

/usr/bin/python3 - "$DIR" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(3)
centers = rng.normal(scale=2.0, size=(4, 8))
for name, n in (("train", 3000), ("test", 500)):
    labels = rng.integers(0, 4, n)
    features = centers[labels] + rng.normal(size=(n, 8))
    np.savetxt(f"{sys.argv[1]}/{name}.csv", np.column_stack([labels, features]), fmt="%.6f",
               delimiter=",")
PY

# check MODE: summary.json's final test figures against NumPy's on params/.
check() {
  /usr/bin/python3 - "$DIR/$1" "$DIR/test.csv" <<'PY'
import json, sys
import numpy as np
results, test = sys.argv[1], np.loadtxt(sys.argv[2], delimiter=",")
labels, x = test[:, 0].astype(int), test[:, 1:]
load = lambda name: np.load(f"{results}/params/{name}.npy").astype(np.float64)
hidden = np.tanh(x @ load("layer0_weights") + load("layer0_bias"))
logits = hidden @ load("layer1_weights") + load("layer1_bias")
shifted = logits - logits.max(axis=1, keepdims=True)
loss = float(np.mean(np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(len(x)), labels]))
accuracy = float(np.mean(logits.argmax(axis=1) == labels))
summary = json.load(open(f"{results}/summary.json"))
reported = (summary["final_eval_loss"], summary["final_eval_accuracy"])
print(f"{results}: reported loss {reported[0]:.6f} accuracy {reported[1]:.4f}; "
      f"NumPy on params/ {loss:.6f} {accuracy:.4f}")
if abs(reported[0] - loss) > 1e-5 * max(1.0, loss) or abs(reported[1] - accuracy) > 1e-9:
    sys.exit("the reported final figures are not the saved model's")
PY
}

for mode in SYNC ASYNC SSP ALLREDUCE; do
  cat > "$DIR/$mode.json" <<JSON
{"job_id": "final_$mode",
 "model": {"kind": "MLP", "hidden_sizes": [16], "activation": "TANH"},
 "data": {"csv": "$DIR/train.csv", "label_column": 0, "test_data": "$DIR/test.csv"},
 "learning_rate": {"base": 0.1}, "consistency": {"mode": "$mode", "ssp_bound": 2},
 "batch_size": 32, "steps": 150, "seed": 5}
JSON
  "$PSCTL" local --ps_server_binary="$PS_SERVER" --ps_worker_binary="$PS_WORKER" \
    --job="$DIR/$mode.json" --workers=2 --device=cpu --results="$DIR/$mode" \
    > "$DIR/$mode.log" 2>&1 || fail "psctl local of the $mode job failed"
  grep -q '"state": "DONE"' "$DIR/$mode/summary.json" || fail "the $mode job did not end DONE"
  check "$mode" || fail "$mode: the final evaluation is not the saved model's"
done
log "PASSED: SYNC, ASYNC, SSP and ALLREDUCE report the saved model's final test figures"
