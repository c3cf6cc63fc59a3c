#!/usr/bin/env bash
# The probe's evidence on the 2xH200 node, in one device call: GPU tests, a full and a quick probe, then
# device_run_rehearsal.sh (plain PyTorch beside the probe; the multi-node path rehearsed on one node). To $OUT.
set -u
export PYTHONUNBUFFERED=1 TIMEFORMAT='%R s wall'
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2
python3 -m pytest -q -p no:cacheprovider tests/test_probe_gpu.py > "$OUT/gpu-tests.log" 2>&1; tail -2 "$OUT/gpu-tests.log"
{ time python3 -m pkroof probe --name h200x2 --out "$OUT/h200x2.json" > "$OUT/full.log" 2>&1 ; } 2>> "$OUT/full.log"
{ time python3 -m pkroof probe --quick --name h200x2 --out /tmp/quick.json > "$OUT/quick.log" 2>&1 ; } 2>> "$OUT/quick.log"
grep -E "wrote|wall" "$OUT/full.log" "$OUT/quick.log"
bash benchmarks/probe/device_run_rehearsal.sh  # plain PyTorch beside it, and the multi-node rehearsal
