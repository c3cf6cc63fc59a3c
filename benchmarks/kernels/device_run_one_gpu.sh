#!/usr/bin/env bash
# What one H200 can check (kind nvidia-h200; the 2-GPU kinds were not lent on 2026-12-01):
#   bash benchmarks/kernels/device_run_one_gpu.sh gpu-state-ce-chunks   single-GPU tests (GPU-state watch, probe copy kernels, emulated
#                                                 ranks), the watch against idle and matmuls, copy-engine chunking
#   bash benchmarks/kernels/device_run_one_gpu.sh local-ceilings  the probe's local ceilings with the clock of each matmul rate, the
#                                                 GPU-state and probe GPU tests
#   bash benchmarks/kernels/device_run_one_gpu.sh gpu-state-ab  the profiler's times with the GPU-state watch on and off
#   bash benchmarks/kernels/device_run_one_gpu.sh ce-sweep-smoke  the copy-engine sweep's options on one rank (a smoke test of the
#                                                 2-GPU session's script: no peers, the local work only), CE tests
#   bash benchmarks/kernels/device_run_one_gpu.sh ll-all-reduce  the LL all-reduce (kernels/low_latency.py): its GPU tests (phased and
#                                                 concurrent emulated ranks), then timed against the flag hand-off
#                                                 with 2 ranks side by side on the one GPU
#   bash benchmarks/kernels/device_run_one_gpu.sh ll-tests the LL GPU tests again, after the kernels declared their protocol
#                                                 (pkroof profile refuses fewer than 2 ranks, so the records' path
#                                                 waits for 2 GPUs; a CPU test covers it with stubbed ranks)
#   bash benchmarks/kernels/device_run_one_gpu.sh ll-collectives the LL all-gather, reduce-scatter and all-to-all too: every LL GPU
#                                                 test (phased, concurrent, the 1-rank group), then ll_local at 128 CTAs
#   bash benchmarks/kernels/device_run_one_gpu.sh ll-local ll_local for the LL all-gather, reduce-scatter and all-to-all,
#                                                 then every LL GPU test again (after the strided-input fix)
#   bash benchmarks/kernels/device_run_one_gpu.sh tile-order the split copies of bidir_ceiling.py in a graph (local smoke), the
#                                                 inter-SM GEMM's tile order / flattening / tiles against cuBLAS
#                                                 (benchmarks/kernels/persistent_gemm.py), the inter-SM GPU tests
#   bash benchmarks/kernels/device_run_one_gpu.sh tile-groups the inter-SM GPU tests with grouped tile orders, then the GEMM
#                                                 alone in groups of 1, 2, 4, 8 and 16 bands, two tiles
#   The copy-engine emulations (modes ce-emulated, ce-emulated-warm, fused-ce-emulated, ce-peer-lanes) ran test code
#   (tests/emulate_ce.py, tests/emulate_fused.py) and are retired (7f02713:benchmarks/kernels/device_run_one_gpu.sh);
#   `python3 -m pytest tests/test_copy_engine_gpu.py` runs every emulated case on one GPU.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv \
  > "$OUT/gpus.csv"
if [ "${1:-gpu-state-ce-chunks}" = gpu-state-ce-chunks ]; then
  timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_state.py tests/test_probe_gpu.py \
    tests/test_profiler_gpu.py 2>&1 | tee "$OUT/gpu-tests.log" | tail -6
  timeout 60 python3 benchmarks/suite/gpu_state_check.py 2>&1 | tee "$OUT/gpu-state.log"
  timeout 180 python3 benchmarks/kernels/ce_alpha.py 16 64 128 2>&1 | grep -v Warning | tee "$OUT/ce-alpha.log"
elif [ "$1" = local-ceilings ]; then
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_state.py tests/test_probe_gpu.py \
    tests/test_copy_engine_gpu.py 2>&1 | tee "$OUT/gpu-tests.log" | tail -4
elif [ "$1" = gpu-state-ab ]; then
  timeout 400 python3 benchmarks/suite/gpu_state_ab.py 2>&1 | grep -v -e Warning -e 'return func' | tee "$OUT/gpu-state-ab.log"
elif [ "$1" = ll-all-reduce ]; then
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k "test_ll_" 2>&1 \
    | tee "$OUT/ll-tests.log" | tail -4
  for ctas in 64 128; do
    timeout 100 python3 benchmarks/kernels/ll_local.py --ctas $ctas 2>&1 | grep -v Warning | tee "$OUT/ll-local-$ctas.log"
  done
elif [ "$1" = ll-tests ]; then
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k "test_ll_" 2>&1 \
    | tee "$OUT/ll-tests.log" | tail -4
elif [ "$1" = ll-collectives ]; then
  timeout 400 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k "test_ll_" 2>&1 \
    | tee "$OUT/ll-tests.log" | tail -8
  timeout 100 python3 benchmarks/kernels/ll_local.py --ctas 128 2>&1 | grep -v Warning | tee "$OUT/ll-local-128.log"
elif [ "$1" = ll-local ]; then
  for kind in all-gather reduce-scatter all-to-all; do
    timeout 100 python3 benchmarks/kernels/ll_local.py --kind $kind --ctas 128 2>&1 | grep -v Warning \
      | tee "$OUT/ll-local-$kind.log"
  done
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k "test_ll_" 2>&1 \
    | tee "$OUT/ll-tests.log" | tail -4
elif [ "$1" = tile-order ]; then
  timeout 60 python3 benchmarks/kernels/split_smoke.py 2>&1 | grep -v Warning | tee "$OUT/split-smoke.log"
  timeout 330 python3 benchmarks/kernels/persistent_gemm.py --tiles 128x256x64x4x8,128x256x64x3x8,256x128x64x3x8 --groups 1,8 \
    2>&1 | grep -v Warning | tee "$OUT/persistent-gemm.log"
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k "inter_sm" 2>&1 \
    | tee "$OUT/inter-sm-tests.log" | tail -4
elif [ "$1" = tile-groups ]; then
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k "inter_sm" 2>&1 \
    | tee "$OUT/inter-sm-tests.log" | tail -4
  timeout 360 python3 benchmarks/kernels/persistent_gemm.py --tiles 128x256x64x4x8,128x256x64x3x8 --groups 1,2,4,8,16 \
    2>&1 | grep -v Warning | tee "$OUT/persistent-gemm.log"
elif [ "$1" = ce-sweep-smoke ]; then
  timeout 150 python3 benchmarks/kernels/kernels_sweep.py 64MiB --ce-chunks 0 --ce-local sm,sm16,dma,none --ce-calls 3 \
    --ce-streams 1,2 2>&1 | grep -v Warning | tee "$OUT/sweep-one-rank.log"
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_copy_engine_gpu.py 2>&1 | tail -2
fi
