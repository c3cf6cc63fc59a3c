#!/usr/bin/env bash
# What one H200 checks of this wave's GPU-touching code (kind nvidia-h200; the 2-GPU kinds were not lent):
#   the oracle and per-sample checks on a real GPU timing path (tests/test_tolerances.py, one NCCL rank), the
#   GPU-state, probe, one-GPU and fault GPU tests, `pkroof probe --quick` on one GPU and what bound makes of its file,
#   fp32 convolutions and matmuls against the roof's compute term (benchmarks/model/conv_tf32.py), then the kernels'
#   and copy-engine GPU tests. Logs under $OUT.
#     bash benchmarks/model/device_one_gpu_checks.sh
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv \
  > "$OUT/gpus.csv"
date -u +%FT%TZ > "$OUT/date.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs tests/test_tolerances.py tests/test_gpu_state.py \
  tests/test_probe_gpu.py tests/test_faults_gpu.py tests/test_one_gpu.py > "$OUT/tests_gpu.log" 2>&1
echo "tests rc=$?" >> "$OUT/tests_gpu.log"
timeout 90 python3 -m pkroof probe --quick --out "$OUT/one.json" > "$OUT/probe.log" 2>&1
echo "probe rc=$?" >> "$OUT/probe.log"
python3 -m pkroof topology show "$OUT/one.json" > "$OUT/show.txt" 2>&1
python3 -m pkroof bound gemm-all-reduce --shape llama3-8b-tp2 -t "$OUT/one.json" > "$OUT/bound_one.txt" 2>&1
echo "bound rc=$?" >> "$OUT/bound_one.txt"
timeout 90 python3 benchmarks/model/conv_tf32.py h200x2 > "$OUT/conv_tf32.log" 2>&1
echo "conv rc=$?" >> "$OUT/conv_tf32.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/test_kernels_gpu.py tests/test_copy_engine_gpu.py \
  > "$OUT/tests_kernels.log" 2>&1
echo "kernels rc=$?" >> "$OUT/tests_kernels.log"
