#!/bin/bash
# tools/reproduce_experiments.sh --quick, as CI runs it: the CI sweep through the same steps as
# the full regeneration of docs/EXPERIMENTS.md (psctl experiment --local, psctl report, the
# stamp naming the commit and the command), with the binaries built for the tests.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

make_work_dir reproduce_experiments
/usr/bin/python3 -c "import matplotlib" 2>/dev/null || skip "python3 cannot import matplotlib"
LOG_FILES=("$DIR/reproduce.log")
"$RUNFILES/tools/reproduce_experiments.sh" --quick --psctl="$PSCTL" --ps_server="$PS_SERVER" \
  --ps_worker="$PS_WORKER" > "$DIR/reproduce.log" 2>&1 ||
  fail "reproduce_experiments.sh --quick failed"
grep -q "reproduce: --quick made a stamped report of the CI sweep" "$DIR/reproduce.log" ||
  fail "no stamped report"
log "PASSED: the quick reproduction ran the CI sweep and stamped its report"
