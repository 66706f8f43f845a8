#!/bin/bash
# The sparse models on real sparse data (docs/EXPERIMENTS.md section 10), from the examples
# Debian's weka package ships: tools/prepare_weka_data.py turns Reuters-21578 "grain" into LIBSVM
# bags of words and the UCI soybean data into CSV categories (checked: sizes, classes, and the
# same bytes on a second run). Then `psctl local` (2 ps, 2 workers, SYNC: deterministic) runs
#  - config/jobs/sparse_reuters.json, SPARSE_LOGISTIC_REGRESSION on 13,058 hashed words, whose
#    test accuracy must be within 1 point of LIBLINEAR's logistic regression on the same files
#    (`-s 0 -B 1 -c 1000`, a negligible penalty, as ours has none; measured 97.35% against
#    97.68%, 588 and 590 of 604 stories right; a guess of "not grain" is right 90.6% of the time);
#  - config/jobs/embedding_bag_soybean.json, EMBEDDING_BAG_MLP on 35 categorical attributes,
#    whose accuracy on the 137 test plants must be no more than 2 points below LIBLINEAR's
#    multiclass logistic regression on the same rows one-hot encoded (`-s 0 -B 1 -c 1`; measured
#    92.7% against 92.0%; the most common disease is 13% of the plants).
#
# Installs weka and liblinear-tools when missing (root and apt-get needed); skips (passes),
# saying why, where it cannot.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

make_work_dir weka

readonly EXAMPLES=/usr/share/doc/weka/examples
apt_install_if_missing "weka liblinear-tools" weka liblinear-train liblinear-predict
[ -d "$EXAMPLES" ] || skip "weka is installed but has no $EXAMPLES"

readonly PREPARE="$RUNFILES/tools/prepare_weka_data.py"
readonly REUTERS_JOB="$RUNFILES/config/jobs/sparse_reuters.json"
readonly SOYBEAN_JOB="$RUNFILES/config/jobs/embedding_bag_soybean.json"
LOG_FILES=("$DIR/prepare.log" "$DIR/liblinear.log" "$DIR/reuters.log" "$DIR/soybean.log")

# --- The data: the jobs name data/weka/..., relative to where psctl runs.
cd "$DIR"
/usr/bin/python3 "$PREPARE" > "$DIR/prepare.log" 2>&1 || fail "prepare_weka_data.py failed"
for part in reuters/train.libsvm:1554 reuters/test.libsvm:604 soybean/train.csv:546 \
            soybean/test.csv:137 soybean/train.onehot.libsvm:546 soybean/test.onehot.libsvm:137; do
  file="data/weka/${part%:*}"
  [ "$(wc -l < "$file")" = "${part#*:}" ] || fail "$file has $(wc -l < "$file") rows"
done
[ "$(grep -c '^+1' data/weka/reuters/train.libsvm) $(grep -c '^+1' data/weka/reuters/test.libsvm)" \
  = "103 57" ] || fail "the Reuters files do not hold 103 and 57 stories about grain"
[ "$(cut -d, -f1 data/weka/soybean/train.csv | sort -u | wc -l)" = 19 ] ||
  fail "the soybean training rows do not hold all 19 diseases"
[ "$(awk -F, '{print NF}' data/weka/soybean/train.csv | sort -u)" = 36 ] ||
  fail "soybean rows are not a label and 35 attributes"
first=$(cat data/weka/*/* | md5sum)
/usr/bin/python3 "$PREPARE" "$DIR/again" > /dev/null
[ "$(cat "$DIR"/again/*/* | md5sum)" = "$first" ] ||
  fail "a second run of prepare_weka_data.py wrote different files"

# LIBLINEAR's test accuracy (percent) on TEST after training on TRAIN with OPTIONS.
liblinear() {
  local train=$1 test=$2
  shift 2
  liblinear-train -s 0 -B 1 -e 0.0001 -q "$@" "$train" "$DIR/model" >> "$DIR/liblinear.log" 2>&1 ||
    fail "liblinear-train failed on $train"
  liblinear-predict "$test" "$DIR/model" "$DIR/predictions" > "$DIR/predict.log" 2>&1 ||
    fail "liblinear-predict failed on $test"
  cat "$DIR/predict.log" >> "$DIR/liblinear.log"
  sed -n 's/^Accuracy = \([0-9.]*\)%.*/\1/p' "$DIR/predict.log"
}

# Runs JOB with psctl local into RESULTS and prints "state test_examples accuracy_percent".
run_job() {
  local job=$1 results=$2
  "$PSCTL" local --ps_server_binary="$PS_SERVER" --ps_worker_binary="$PS_WORKER" \
    --job="$job" --ps=2 --workers=2 --device=cpu --results="$results" \
    > "$results.log" 2>&1 || fail "psctl local failed on $job"
  /usr/bin/python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print(s["state"], s["data"]["test_examples"], 100 * s["final_eval_accuracy"])' \
    "$results/summary.json"
}

# --- Reuters grain: sparse logistic regression against LIBLINEAR's.
reference=$(liblinear data/weka/reuters/train.libsvm data/weka/reuters/test.libsvm -c 1000)
read -r state test ours <<< "$(run_job "$REUTERS_JOB" "$DIR/reuters")"
log "Reuters grain, test accuracy on $test stories: LIBLINEAR ${reference}%, ours ${ours}% ($state)"
[ "$state $test" = "DONE 604" ] || fail "the Reuters job ended $state with $test test stories"
awk -v a="$ours" -v b="$reference" 'BEGIN { d = a - b; exit !(d <= 1 && d >= -1) }' ||
  fail "Reuters: ${ours}% against LIBLINEAR's ${reference}%, more than 1 point apart"

# --- Soybean: the embedding bag against LIBLINEAR on one-hot rows.
reference=$(liblinear data/weka/soybean/train.onehot.libsvm data/weka/soybean/test.onehot.libsvm \
  -c 1)
read -r state test ours <<< "$(run_job "$SOYBEAN_JOB" "$DIR/soybean")"
log "soybean, test accuracy on $test plants: LIBLINEAR ${reference}%, ours ${ours}% ($state)"
[ "$state $test" = "DONE 137" ] || fail "the soybean job ended $state with $test test plants"
awk -v a="$ours" -v b="$reference" 'BEGIN { exit !(a >= b - 2) }' ||
  fail "soybean: ${ours}%, more than 2 points below LIBLINEAR's ${reference}%"
log "passed"
