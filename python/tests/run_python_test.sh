#!/bin/bash
# Runs a Python test of the ps package (python/tests/*_test.py, the first argument) under
# Debian's Python 3 (/usr/bin/python3: python3-torch and the binding's python3-dev are its),
# with the package from runfiles and the built ps_server. Skips, saying why, where
# Debian's PyTorch is missing and cannot be installed (tools/setup.sh installs it).
set -euo pipefail
RUNFILES="${RUNFILES_DIR:-$PWD}"
[ -d "$RUNFILES/ps" ] && RUNFILES="$RUNFILES/ps"
readonly PYTHON=/usr/bin/python3
if ! "$PYTHON" -c "import torch, numpy" 2>/dev/null; then
  echo "SKIPPED: $PYTHON cannot import torch and numpy (apt-get install python3-torch" \
       "python3-numpy, as tools/setup.sh does)"
  exit 0
fi
export PS_SERVER="$RUNFILES/server/ps_server"
export PYTHONPATH="$RUNFILES/python/ps/site:$RUNFILES/python/tests"
export EXAMPLES_DIR="$RUNFILES/examples"
exec "$PYTHON" -X faulthandler "$RUNFILES/python/tests/$1"
