#!/bin/bash
# psctl report's selection on the validation split (a sweep's "select"): in a results directory
# made here (two modes, three learning rates, three seeds each, with validation.csv and the
# final figures in sweep.csv), the learning rate selected for each mode is the one with the
# best mean final validation accuracy, also where another rate has the better test accuracy
# (so the test split decides nothing), and the report draws the validation curves, not the
# test split's, against steps and against epochs. Skips where Debian's python3 cannot import
# matplotlib.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

make_work_dir report_selection
/usr/bin/python3 -c "import matplotlib" 2>/dev/null || skip "python3 cannot import matplotlib"

/usr/bin/python3 - "$DIR/sweep" <<'PY'
import json, os, sys
root = sys.argv[1]
os.makedirs(root)
json.dump({"name": "select", "description": "", "source": "select.json", "target_loss": 0,
           "repeats": 3, "settings": ["consistency.mode", "learning_rate.base"],
           "select": "learning_rate.base"}, open(f"{root}/sweep.json", "w"))
# Final (validation, test) accuracy by mode and rate: SYNC's validation prefers 0.1 while its
# test prefers 0.3; ASYNC's validation prefers 0.3.
# SYNC at 0.4 scores best of all on validation in the runs that finished, but one of its three
# diverged (FAILED): a rate that does not always finish is not chosen.
final = {("SYNC", "0.1"): (0.90, 0.85), ("SYNC", "0.2"): (0.88, 0.86),
         ("SYNC", "0.3"): (0.80, 0.95), ("SYNC", "0.4"): (0.99, 0.99),
         ("ASYNC", "0.1"): (0.70, 0.70), ("ASYNC", "0.2"): (0.75, 0.76),
         ("ASYNC", "0.3"): (0.82, 0.81)}
columns = ["point", "dir", "consistency.mode", "learning_rate.base", "workers", "ps", "repeat",
           "seed", "state", "steps", "wall_time_s", "time_per_step_s", "examples_per_second",
           "final_train_loss", "final_eval_loss", "final_eval_accuracy", "final_validation_loss",
           "final_validation_accuracy", "staleness_mean", "staleness_max"]
rows = [",".join(columns)]
for (mode, rate), (validation, test) in final.items():
    for repeat in range(3):
        name = f"mode={mode}_rate={rate}_repeat={repeat}"  # No commas: one CSV cell.
        point = f"{root}/{name}"
        os.makedirs(point)
        v, t = validation + 0.002 * repeat, test - 0.002 * repeat
        json.dump({"spec": {"model": {"kind": "MLP"}, "consistency": {"mode": mode},
                            "batch_size": 32}}, open(f"{point}/job.json", "w"))
        # 2 workers of batch 32 on 640 training examples: a tenth of an epoch a step.
        json.dump({"state": "DONE", "data": {"train_examples": 640}},
                  open(f"{point}/summary.json", "w"))
        with open(f"{point}/metrics.csv", "w") as f:
            f.write("time_s,worker,step,global_step,epoch,loss,examples_per_second,staleness,"
                    "bytes_sent,bytes_received\n")
            for step in range(1, 11):
                f.write(f"{0.1 * step},0,{step},{step},0,{1.0 / step},100,0,0,0\n")
        with open(f"{point}/validation.csv", "w") as f:
            f.write("time_s,step,loss,accuracy,examples\n0.5,5,0.6,0.5,10\n"
                    f"1.0,10,0.4,{v},10\n")
        with open(f"{point}/eval.csv", "w") as f:
            f.write(f"time_s,step,loss,accuracy,examples\n1.0,10,0.4,{t},10\n")
        with open(f"{point}/staleness.csv", "w") as f:
            f.write("shard,worker,staleness,count\n0,0,0,10\n")
        state = "FAILED" if (mode, rate, repeat) == ("SYNC", "0.4", 2) else "DONE"
        rows.append(",".join(str(x) for x in [
            name, name, mode, rate, 2, 1, repeat, repeat + 1, state, 10, 1.0, 0.1, 100, 0.3,
            0.4, t, 0.4, v, 0, 0]))
open(f"{root}/sweep.csv", "w").write("\n".join(rows) + "\n")
PY

"$PSCTL" report "$DIR/sweep" > "$DIR/report.log" 2>&1 ||
  fail "psctl report failed: $(cat "$DIR/report.log")"
report="$DIR/sweep/report.md"
grep -q "## Selected on the validation split" "$report" || fail "no selection section"
# mode | selected base | values tried | validation accuracy | test accuracy | test loss | runs
grep -qE '^\| SYNC \| 0\.1 \| 0\.1, 0\.2, 0\.3, 0\.4 \| 0\.902 ± [0-9.]+ \| 0\.848 ± [0-9.]+ \| [0-9.]+ \| 3 of 3 \|' "$report" ||
  fail "SYNC should select 0.1 on validation (its test prefers 0.3; 0.4 had a run fail): $(grep -A6 Selected "$report")"
grep -qE '^\| ASYNC \| 0\.3 \| ' "$report" ||
  fail "ASYNC should select 0.3: $(grep -A6 Selected "$report")"
grep -q "plots/validation_accuracy.png" "$report" || fail "no validation curves"
if grep -q "plots/test_accuracy.png" "$report"; then
  fail "test accuracy curves drawn although the test split is evaluated only at the end"
fi
grep -q "final validation accuracy" "$report" || fail "no validation column in the results"
# Convergence against epochs: the validation curves and the training loss, with a step of 2
# workers of batch 32 on 640 examples counted as 0.1 epochs.
grep -q "plots/validation_accuracy_vs_epoch.png" "$report" || fail "no validation curves by epoch"
grep -q "plots/loss_vs_epoch.png" "$report" || fail "no training loss by epoch"
/usr/bin/python3 - "$DIR/sweep" <<'PY' || fail "epochs per step are not batch x workers / train_examples"
import csv, os, sys
sys.path.insert(0, "tools")
import report
row = next(csv.DictReader(open(os.path.join(sys.argv[1], "sweep.csv"))))
run = report.Run(os.path.join(sys.argv[1], row["dir"]), row)
assert abs(run.epochs_per_step - 0.1) < 1e-12, run.epochs_per_step
PY
# A setting whose values are not numbers can be selected too (the mode, for each rate).
/usr/bin/python3 - "$DIR/sweep/sweep.json" <<'PY'
import json, sys
sweep = json.load(open(sys.argv[1]))
sweep["select"] = "consistency.mode"
json.dump(sweep, open(sys.argv[1], "w"))
PY
"$PSCTL" report "$DIR/sweep" > "$DIR/report.log" 2>&1 ||
  fail "psctl report failed selecting the mode: $(cat "$DIR/report.log")"
grep -qE '^\| 0\.3 \| ASYNC \| ASYNC, SYNC \| ' "$report" ||
  fail "at rate 0.3 SYNC's validation is 0.80, ASYNC's 0.82: $(grep -A8 Selected "$report")"
log "PASSED: the report selects on the validation split and judges the test split once"
