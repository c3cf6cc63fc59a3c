#!/usr/bin/env bash
# pkroof's fused tensor-parallel GEMMs and the GEMM rate on 2×H200 (kind nvidia-h200-x2), one mode per device call:
#   bash benchmarks/kernels/device_run_fused.sh inter-sm
#   the inter-SM GPU tests, then gemm-all-reduce at small, llama3-8b-tp2 and llama3-70b-tp8 with the
#   shipped settings (benchmarks/kernels/2026-11-30-inter-sm-h200x2.md, call 5)
#   bash benchmarks/kernels/device_run_fused.sh fixed-costs-fit
#   per-shape inter-SM CTAs on the GPUs, the fused kernels at two tiny shapes and the
#   gemm-all-reduce shapes (benchmarks/kernels/2026-11-30-fixed-costs-h200x2.md, call 1)
#   bash benchmarks/kernels/device_run_fused.sh fixed-costs-check
#   the copy-engine GEMM + all-reduce's two paths, fused kernels at shapes the fixed costs
#   were not fitted on (benchmarks/kernels/2026-11-30-fixed-costs-h200x2.md, call 3)
#   bash benchmarks/kernels/device_run_fused.sh deepseek
#   the fused GEMMs at deepseek-v3-dense-tp8, two records outside ±15% again (same write-up, call 4)
#   bash benchmarks/kernels/device_run_fused.sh gemm-rates
#   the GEMM rate by shape and busy time (benchmarks/kernels/gemm_rates.py), the copy-engine
#   pipeline with and without its local work, collectives at 1 GiB and 512 MiB (gemm-rates write-up, call e1)
#   bash benchmarks/kernels/device_run_fused.sh fused-side-stream
#   not yet run: the fused kernels after their side-stream refactor on 2 real ranks, the
#   copy-engine overlaps at the shapes that moved the model (benchmarks/model/2026-12-01-model-ce-overlap.md)
#   bash benchmarks/kernels/device_run_fused.sh ll-gemms
#   not yet run: the three tensor-parallel GEMMs at the small shape, serial LL GEMMs beside the
#   fused kernels (benchmarks/kernels/2026-12-01-ll-protocol.md; ≤ 360 s)
#   bash benchmarks/kernels/device_run_fused.sh tile-groups
#   not yet run: the inter-SM GEMM + all-reduce in groups of 8 bands against row-major, then the
#   profiler with PKROOF_INTER_SM_GROUP=8 (benchmarks/kernels/2026-12-01-tile-order.md; ≤ 560 s)
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
  inter-sm)
    timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k inter_sm 2>&1 \
      | tee "$OUT/gpu-tests.log" | tail -4
    for shape in small llama3-8b-tp2 llama3-70b-tp8; do  # one results file
      echo "== pkroof profile gemm-all-reduce --shape $shape" | tee -a "$OUT/fused-ar.log"
      timeout 80 python3 -m pkroof profile gemm-all-reduce --shape $shape --timeout 60 --resume --out "$OUT/fused-ar" \
        2>&1 | grep -v -e Warning -e 'return func' | tee -a "$OUT/fused-ar.log"
    done
    ;;
  fixed-costs-fit)
    begin=$(date +%s) budget=570
    timeout 110 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k inter_sm 2>&1 \
      | tee "$OUT/gpu-tests.log" | tail -4
    for tokens in 128 512; do
      fprof 110 $F -p tokens=$tokens -p in_features=1024 -p out_features=512
    done
    for shape in llama3-8b-tp2 llama3-70b-tp8 llama3-70b-tp8-o-proj small; do
      fprof 90 gemm-all-reduce --shape $shape
    done
    ;;
  fixed-costs-check)
    begin=$(date +%s) budget=520
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py -k copy_engine 2>&1 \
      | tee "$OUT/gpu-tests.log" | tail -4
    fprof 120 $F -p tokens=256 -p in_features=2048 -p out_features=1024
    for tokens in 128 512; do
      fprof 50 gemm-all-reduce --impl pkroof-gemm-ar-ce -p tokens=$tokens -p in_features=1024 -p out_features=512
    done
    fprof 50 gemm-all-reduce --impl pkroof-gemm-ar-ce --shape small
    fprof 120 $F -p tokens=1024 -p in_features=4096 -p out_features=2048
    ;;
  deepseek)
    begin=$(date +%s) budget=400 impl_timeout=90
    fprof 220 gemm-reduce-scatter all-gather-gemm --shape deepseek-v3-dense-tp8
    fprof 60 gemm-all-reduce -p tokens=256 -p in_features=2048 -p out_features=1024
    fprof 60 reduce-scatter
    ;;
  gemm-rates)
    timeout 150 python3 benchmarks/kernels/gemm_rates.py 2>&1 | grep -v Warning | tee "$OUT/gemm-rates.log"
    timeout 100 python3 benchmarks/kernels/kernels_sweep.py 256MiB --ce-chunks 8,16,32,64 --ce-local sm,none 2>&1 \
      | grep -v Warning | tee "$OUT/ce-sweep.log"
    timeout 60 python3 benchmarks/kernels/kernels_sweep.py 1GiB --ce-chunks 32,64 --ce-local sm,none 2>&1 \
      | grep -v Warning | tee -a "$OUT/ce-sweep.log"
    step big1g 170 $C --size 1GiB
    step big512 110 $C --size 512MiB
    ;;
  fused-side-stream)
    begin=$(date +%s) budget=560
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py tests/test_copy_engine_gpu.py \
      > "$OUT/gpu-tests.log" 2>&1; tail -3 "$OUT/gpu-tests.log"
    fprof 120 $F -p tokens=256 -p in_features=2048 -p out_features=1024
    fprof 120 $F -p tokens=1024 -p in_features=4096 -p out_features=2048
    for tokens in 128 512; do
      fprof 50 gemm-all-reduce --impl pkroof-gemm-ar-ce -p tokens=$tokens -p in_features=1024 -p out_features=512
    done
    ;;
  ll-gemms)
    step ll-gemm 360 gemm-reduce-scatter all-gather-gemm gemm-all-reduce
    ;;
  tile-groups)
    timeout 170 python3 benchmarks/kernels/inter_sm_sweep.py llama3-8b-tp2 --comm 16 --tiles 128x256x64x4x8,128x256x64x3x8 \
      --groups 1,8 2>&1 | grep -v Warning | tee "$OUT/group-8b.log"
    timeout 190 python3 benchmarks/kernels/inter_sm_sweep.py llama3-70b-tp8 --comm 8,12 --tiles 128x256x64x4x8,128x256x64x3x8 \
      --groups 1,8 2>&1 | grep -v Warning | tee "$OUT/group-70b.log"
    begin=$(date +%s) budget=200
    export PKROOF_INTER_SM_GROUP=8  # the records list it among their settings
    fprof 90 gemm-all-reduce --impl pkroof-gemm-ar-inter-sm --shape llama3-8b-tp2
    fprof 110 gemm-all-reduce --impl pkroof-gemm-ar-inter-sm --shape llama3-70b-tp8
    unset PKROOF_INTER_SM_GROUP
    ;;
  *) echo "usage: bash benchmarks/kernels/device_run_fused.sh MODE (one of: inter-sm fixed-costs-fit fixed-costs-check deepseek gemm-rates fused-side-stream ll-gemms tile-groups)" >&2; exit 2 ;;
esac
