#!/bin/bash
# Real data end to end: tools/prepare_digits.py turns Debian's python3-sklearn copy of the UCI
# handwritten digits into data/digits/{train,test}.csv (checked: 1,437 and 360 rows of 64
# pixels and a label, every class in both, the same files on every run), and `psctl local`
# trains section 8's MLP on them (docs/EXPERIMENTS.md) on 2 ps and 2 workers in SYNC, 400 steps:
# the test accuracy on the 360 held-out images must reach 95% (SYNC with every worker is
# deterministic: 96.1% on every run). Then the same job with compressed pushes and pulls (top-k
# of 1% with error feedback, in BFLOAT16; docs/EXPERIMENTS.md section 9) must end within 0.5
# points of it while sending under a tenth of the bytes per step (measured: 96.1%, 458 bytes a
# step against 19,526).
#
# Installs python3-sklearn when missing (root and apt-get needed); skips (passes), saying why,
# where it cannot.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

make_work_dir digits

readonly SOURCE=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
if [ ! -e "$SOURCE" ]; then
  [ "$(id -u)" = 0 ] || skip "no $SOURCE, and installing python3-sklearn needs root"
  command -v apt-get >/dev/null || skip "no $SOURCE, and no apt-get to install python3-sklearn"
  log "installing python3-sklearn"
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends \
    python3-sklearn > /dev/null 2>&1 || skip "apt-get cannot install python3-sklearn"
  [ -e "$SOURCE" ] || skip "python3-sklearn is installed but has no $SOURCE"
fi

LOG_FILES=("$DIR/prepare.log" "$DIR/local.log" "$DIR/compressed.log")

# --- The split: sizes, columns, classes, and the same bytes on a second run.
/usr/bin/python3 tools/prepare_digits.py "$DIR/data" > "$DIR/prepare.log" 2>&1 ||
  fail "prepare_digits.py failed"
for part in train:1437 test:360; do
  file="$DIR/data/${part%:*}.csv"
  [ "$(wc -l < "$file")" = "${part#*:}" ] || fail "$file has $(wc -l < "$file") rows"
  columns=$(awk -F, '{print NF}' "$file" | sort -u)
  [ "$columns" = 65 ] || fail "$file has rows of $columns columns, not 65"
  classes=$(cut -d, -f65 "$file" | sort -un | tr '\n' ' ')
  [ "$classes" = "0 1 2 3 4 5 6 7 8 9 " ] || fail "$file has the classes $classes"
done
first=$(cat "$DIR/data/train.csv" "$DIR/data/test.csv" | md5sum)
/usr/bin/python3 tools/prepare_digits.py "$DIR/again" > /dev/null
[ "$(cat "$DIR/again/train.csv" "$DIR/again/test.csv" | md5sum)" = "$first" ] ||
  fail "a second run of prepare_digits.py split the images differently"
sort "$DIR/data/train.csv" "$DIR/data/test.csv" | uniq -d > "$DIR/shared.txt"
# The source has a few identical rows of its own; none may be in both files more than it is.
[ "$(zcat "$SOURCE" | sort | uniq -d | wc -l)" -ge "$(wc -l < "$DIR/shared.txt")" ] ||
  fail "the training and test files share images the source holds once"

# --- Section 8's MLP on them, SYNC on 2 workers.
cat > "$DIR/job.json" <<EOF2
{"job_id": "digits",
 "model": {"kind": "MLP", "hidden_sizes": [64], "activation": "TANH"},
 "data": {"csv": "$DIR/data/train.csv", "test_data": "$DIR/data/test.csv", "label_column": 64,
          "normalize": true},
 "optimizer": {"kind": "SGD"}, "learning_rate": {"base": 0.1},
 "consistency": {"mode": "SYNC"}, "batch_size": 32, "steps": 400, "eval_interval": 100,
 "seed": 1}
EOF2
"$PSCTL" local --ps_server_binary="$PS_SERVER" --ps_worker_binary="$PS_WORKER" \
  --job="$DIR/job.json" --ps=2 --workers=2 --device=cpu --results="$DIR/results" \
  > "$DIR/local.log" 2>&1 || fail "psctl local failed"
summary=$(cat "$DIR/results/summary.json")
accuracy=$(/usr/bin/python3 -c 'import json, sys; s = json.load(sys.stdin)
print(s["state"], s["data"]["train_examples"], s["data"]["test_examples"], s["final_eval_accuracy"])' \
  <<< "$summary")
log "state, training and test images, test accuracy: $accuracy"
read -r state train test value <<< "$accuracy"
[ "$state $train $test" = "DONE 1437 360" ] || fail "summary.json: $summary"
awk -v a="$value" 'BEGIN { exit !(a >= 0.95) }' || fail "test accuracy $value, below 0.95"

# --- The same job compressed: top-k 1% with error feedback, values in BFLOAT16.
sed 's/"seed": 1}/"seed": 1, "compression": {"encoding": "BFLOAT16", "topk_fraction": 0.01}}/' \
  "$DIR/job.json" > "$DIR/compressed.json"
grep -q topk_fraction "$DIR/compressed.json" || fail "could not write the compressed job"
"$PSCTL" local --ps_server_binary="$PS_SERVER" --ps_worker_binary="$PS_WORKER" \
  --job="$DIR/compressed.json" --ps=2 --workers=2 --device=cpu --results="$DIR/compressed" \
  > "$DIR/compressed.log" 2>&1 || fail "psctl local failed on the compressed job"
compared=$(/usr/bin/python3 -c 'import json, sys
plain, compressed = (json.load(open(sys.argv[i] + "/summary.json")) for i in (1, 2))
print(compressed["state"], compressed["final_eval_accuracy"], plain["bytes_sent_per_step"],
      compressed["bytes_sent_per_step"])' "$DIR/results" "$DIR/compressed")
log "compressed: state, test accuracy, bytes sent per step float32 and compressed: $compared"
read -r state compressed_accuracy plain_bytes compressed_bytes <<< "$compared"
[ "$state" = DONE ] || fail "the compressed job ended $state"
awk -v a="$compressed_accuracy" -v b="$value" 'BEGIN { exit !(a >= b - 0.005) }' ||
  fail "compressed test accuracy $compressed_accuracy, more than 0.5 points below $value"
awk -v c="$compressed_bytes" -v p="$plain_bytes" 'BEGIN { exit !(c * 10 < p) }' ||
  fail "compressed pushes sent $compressed_bytes bytes a step against $plain_bytes"
