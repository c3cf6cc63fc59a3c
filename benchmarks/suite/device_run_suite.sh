#!/usr/bin/env bash
# The problem suite on the GPU node at its default shapes: reference + torch's fast paths where they apply.
# Bounded to fit one device call; rerun with the partial results carried in .tmprun/suite to resume:
#   bash benchmarks/suite/device_run_suite.sh [seconds]
set -u
export PYTHONUNBUFFERED=1
budget=${1:-520}
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2
mkdir -p "$OUT/suite"
[ -f .tmprun/suite/results.jsonl ] && cp .tmprun/suite/results.jsonl "$OUT/suite/results.jsonl"
if [ ! -f .tmprun/suite/results.jsonl ]; then
  python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py tests/test_probe_gpu.py 2>&1 | tee "$OUT/gpu-tests.log" | tail -4
fi
problems=$(python3 -m pkroof problems | tail -n +3 | awk '{print $1}')
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpus.csv"
timeout "$budget" python3 -m pkroof profile $problems --timeout 120 --resume --out "$OUT/suite" 2>&1 \
  | grep -v -e Warning -e 'return func' | tee -a "$OUT/suite.log"
echo "profile exit: ${PIPESTATUS[0]}"
