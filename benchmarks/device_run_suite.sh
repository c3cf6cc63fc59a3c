#!/usr/bin/env bash
# The problem suite on the GPU node at its default shapes, reference + torch's fast paths where they apply.
# Not yet run (written 2026-11-30 when the session's device time was spent): the next session runs it first.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2
python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py tests/test_probe_gpu.py 2>&1 | tail -4
problems=$(python3 -m pkroof problems | tail -n +3 | awk '{print $1}')
python3 -m pkroof profile $problems --timeout 120 --out "$OUT/suite" 2>&1 | grep -v Warning | tee "$OUT/suite.log"
