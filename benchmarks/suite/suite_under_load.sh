#!/usr/bin/env bash
# The whole test suite on a busy machine (issue 25): a busy loop holds one core for the whole run while the suite
# runs beside it; prints the suite's wall time. Run from the repository root, in the project's environment:
#     bash benchmarks/suite/suite_under_load.sh
set -u
python -c "while True: pass" &
busy=$!
trap 'kill $busy' EXIT
start=$(date +%s)
python -m pytest -q -p no:cacheprovider tests/ --durations=25
status=$?
end=$(date +%s)
echo "suite: $((end - start)) s wall, exit $status, beside a busy loop on one core (nproc: $(nproc))"
exit $status
