#!/usr/bin/env bash
# Issue 28 items 3 and 4 on a GPU in one call: builds the plants, runs the hang check and the stress
# step on s8_persistent_split with and without each plant, prints a table (tools/stress_gpu_check.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
exec "$PYTHON" tools/stress_gpu_check.py "$@"
