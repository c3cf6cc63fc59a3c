#!/usr/bin/env bash
# pkroof's collectives on 2×H200 (kind nvidia-h200-x2) through the profiler, beside NCCL, one mode per device call:
#   bash benchmarks/kernels/device_run_collectives.sh small-cap21
#   the collectives at 256 KiB and 1 MiB, at most 21 calls per graph sample (the hand-offs
#   calibrated into topology/data/h200x2.json; benchmarks/suite/2026-11-30-sampling-h200x2.md, calls 4-5)
#   bash benchmarks/kernels/device_run_collectives.sh large
#   probe and profiler GPU tests, the collectives at 64 MiB and 256 MiB (halving copy-engine chunks;
#   benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md, call n1)
#   bash benchmarks/kernels/device_run_collectives.sh huge
#   the probe's sustained matmul rate, halving against equal copy-engine chunks, GPU tests, the
#   collectives at 1 GiB and 512 MiB (benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md, call e2)
#   bash benchmarks/kernels/device_run_collectives.sh odd-size
#   the collectives at 100000004 bytes, an odd first halving chunk (gemm-rates write-up, call n6)
#   bash benchmarks/kernels/device_run_collectives.sh two-copy-streams
#   not yet run: GPU tests with the per-rank GPU state, two copy streams against one and the
#   gathers' copy-out on 32/64 CTAs at 256/512 MiB, then 512 MiB through the profiler on two copy streams
#   (benchmarks/kernels/2026-12-01-one-gpu-h200.md)
#   bash benchmarks/kernels/device_run_collectives.sh all-reduce-in-place
#   not yet run: the all-reduce at 16 KiB-64 MiB with NCCL in place beside the reference and the
#   LL kernels, and the decode GEMV + all-reduce (benchmarks/suite/2026-12-01-reference-copy.md)
#   bash benchmarks/kernels/device_run_collectives.sh all-reduce-in-place-short
#   not yet run: the same at 256 KiB and 16 KiB and the decode GEMV (≤ 280 s)
#   bash benchmarks/kernels/device_run_collectives.sh ll-collectives
#   not yet run: all-gather, reduce-scatter, all-to-all at 256 KiB and 16 KiB, LL beside push and
#   NCCL (benchmarks/kernels/2026-12-01-ll-protocol.md; ≤ 420 s)
#   bash benchmarks/kernels/device_run_collectives.sh bidir-two-engines
#   not yet run: the both-ways ceiling with the bytes split over two engines at once
#   (benchmarks/kernels/bidir_ceiling.py, 16-128 MiB; benchmarks/kernels/2026-12-01-tile-order.md; ≤ 150 s)
# Every step is bounded (timeout) so a hang in one still leaves the others' logs under $OUT.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpus.csv"
step() {  # step NAME SECONDS ARGS...: one profile run into $OUT/NAME
  local name=$1 secs=$2; shift 2
  echo "== $name: pkroof profile $*"
  timeout "$secs" python3 -m pkroof profile "$@" --timeout 60 --out "$OUT/$name" 2>&1 \
    | grep -v -e Warning -e 'return func' | tee "$OUT/$name.log"
}
fprof() {  # fprof SECONDS ARGS...: pkroof profile into one results file ($OUT/fused) and one log while the call has
  # time left of `budget` seconds from `begin` (each mode that uses it sets both); skipped under 30 s
  local secs=$1 left=$(( budget - ($(date +%s) - begin) )); shift
  [ "$left" -lt "$secs" ] && secs=$left
  [ "$secs" -lt 30 ] && { echo "== skipped (time): $*" | tee -a "$OUT/fused.log"; return; }
  echo "== pkroof profile $*" | tee -a "$OUT/fused.log"
  timeout "$secs" python3 -m pkroof profile "$@" --timeout "${impl_timeout:-60}" --resume --out "$OUT/fused" 2>&1 \
    | grep -v -e Warning -e 'return func' | tee -a "$OUT/fused.log"
}
C="all-reduce all-gather reduce-scatter all-to-all"
F="gemm-reduce-scatter all-gather-gemm gemm-all-reduce"
case "${1:-}" in
  small-cap21)
    step coll256k 200 $C --size 256KiB
    step coll1m 200 $C
    ;;
  large)
    timeout 220 python3 -m pytest -q -p no:cacheprovider tests/test_probe_gpu.py tests/test_profiler_gpu.py 2>&1 \
      | tee "$OUT/gpu-tests.log" | tail -3
    step big64 150 $C --size 64MiB
    step big256 200 $C --size 256MiB
    ;;
  huge)
    timeout 60 python3 benchmarks/kernels/gemm_rates.py --probe 2>&1 | grep -v Warning | tee "$OUT/probe-rates.log"
    timeout 90 python3 benchmarks/kernels/kernels_sweep.py 64MiB 256MiB 1GiB --ce-chunks 0,16,32 --ce-local sm 2>&1 \
      | grep -v Warning | tee "$OUT/ce-sweep.log"
    export PKROOF_CE_SCHEDULE=halving  # the profiled copy-engine kernels use the halving chunks (the sweep compares)
    step big1g 200 $C --size 1GiB
    timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_probe_gpu.py tests/test_profiler_gpu.py 2>&1 \
      | tee "$OUT/gpu-tests.log" | tail -3
    step big512 120 $C --size 512MiB
    ;;
  odd-size)
    step odd100m 200 $C --size 100000004
    ;;
  two-copy-streams)
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py tests/test_gpu_state.py \
      tests/test_copy_engine_gpu.py > "$OUT/gpu-tests.log" 2>&1; tail -3 "$OUT/gpu-tests.log"
    # halving chunks, SM copy-out, 3 calls per sample (the profiler's at these sizes); rows print as measured
    # and the gathers' copy-out on 32 or 64 CTAs (spread over the DMAs rather than a full-grid burst; on one H200 a
    # 64 MiB copy took 33.9 µs on the full grid, 158.9 on 16 CTAs: too slow to hide, benchmarks/kernels/data/2026-12-01-one-gpu/ce-sweep-smoke/)
    timeout 200 python3 benchmarks/kernels/kernels_sweep.py 256MiB 512MiB --ce-chunks 0 --ce-local sm,sm32,sm64,none \
      --ce-calls 3 --ce-streams 1,2 2>&1 | grep -v Warning | tee "$OUT/ce-streams.log"
    export PKROOF_CE_STREAMS=2  # the records list it among their settings
    step streams2 220 all-gather reduce-scatter all-to-all --size 512MiB
    unset PKROOF_CE_STREAMS
    ;;
  all-reduce-in-place)
    for size in 16KiB 256KiB 1MiB; do
      step "inplace-$size" 120 all-reduce --size $size
    done
    step inplace-64MiB 150 all-reduce --size 64MiB
    step decode-70b 60 decode-gemv-all-reduce --shape llama3-70b-tp8  # 570 s at most
    ;;
  all-reduce-in-place-short)
    step inplace-256KiB 120 all-reduce --size 256KiB
    step inplace-16KiB 100 all-reduce --size 16KiB
    step decode-70b 60 decode-gemv-all-reduce --shape llama3-70b-tp8
    ;;
  ll-collectives)
    step ll-256KiB 240 all-gather reduce-scatter all-to-all --size 256KiB
    step ll-16KiB 180 all-gather reduce-scatter all-to-all --size 16KiB
    ;;
  bidir-two-engines)
    PKROOF_CEILING_WAYS=split timeout 150 python3 benchmarks/kernels/bidir_ceiling.py 16 32 64 128 2>&1 | grep -v Warning \
      | tee "$OUT/ceiling-split.log"
    ;;
  *) echo "usage: bash benchmarks/kernels/device_run_collectives.sh MODE (one of: small-cap21 large huge odd-size two-copy-streams all-reduce-in-place all-reduce-in-place-short ll-collectives bidir-two-engines)" >&2; exit 2 ;;
esac
