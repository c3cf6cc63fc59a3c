#!/usr/bin/env bash
# pkroof's kernels on the 2xH200 node, in one device call:
#   bash benchmarks/device_run_kernels.sh check    emulated-rank tests + correctness at awkward sizes + fused (small)
#   bash benchmarks/device_run_kernels.sh sweep    emulated-rank tests, the CTA sweep, fused GEMMs at llama3-8b-tp2
#   bash benchmarks/device_run_kernels.sh blocks   the CTA sweep over block sizes 4096, 8192, 16384 (not run yet)
#   bash benchmarks/device_run_kernels.sh tma      the TMA pushes: emulated ranks, then the profiler (not run yet)
#   bash benchmarks/device_run_kernels.sh variants GPU tests; sweeps of the pipelined copy-engine chunk size and of
#                                                  the push / split-role / TMA kernels over CTAs and blocks
#   bash benchmarks/device_run_kernels.sh final    collectives at 64 MiB and 256 KiB, GEMM + all-reduce, fused GEMMs at
#                                                  llama3-70b-tp8, then the profiler's GPU test in the time left
#   bash benchmarks/device_run_kernels.sh next     the open questions of 2026-11-30 (CE copy-out, TMA boxes, pull, 1 MiB)
#   bash benchmarks/device_run_kernels.sh verify   GPU tests (kernels, profiler, probe), the both-ways copy ceiling,
#                                                  TMA boxes, copy-engine copy-out by DMA or SMs
#   bash benchmarks/device_run_kernels.sh big      the rest of the GPU tests, a copy-engine timeline, the collectives
#                                                  at 256 MiB through the profiler
#   bash benchmarks/device_run_kernels.sh last     the 8-rank split-role tests the big call's timeout cut, the
#                                                  copy-engine gathers at 64 MiB, the rest of 256 MiB
#   bash benchmarks/device_run_kernels.sh odd      TMA, split and CE variants through the profiler at an awkward size
#   bash benchmarks/device_run_kernels.sh align    GPU tests of the launcher and the timing, the host-skew A/B of the
#                                                  timing (benchmarks/timing_align_ab.py), collectives at 256 KiB
#   bash benchmarks/device_run_kernels.sh intersm  the inter-SM GEMM + all-reduce (persistent Triton GEMM): GPU tests,
#                                                  its sweep (benchmarks/inter_sm_sweep.py), the profiler
#   bash benchmarks/device_run_kernels.sh intersm2 the same with wider steps and pipelined units: sweep over
#                                                  communication CTAs and steps, the profiler with the sweep's best
#                                                  (llama3-8b-tp2, llama3-70b-tp8), collectives at 256 KiB
#   bash benchmarks/device_run_kernels.sh intersm3 communication CTAs x warps at llama3-8b-tp2 and llama3-70b-tp8,
#                                                  the profiler at both with the best on both, all-gather and
#                                                  all-to-all at 256 KiB twice
#   bash benchmarks/device_run_kernels.sh intersm4 the inter-SM GPU tests with the final settings, then the profiler
#                                                  on gemm-all-reduce at small, llama3-8b-tp2 and llama3-70b-tp8
#   bash benchmarks/device_run_kernels.sh pilot    the suite at default shapes with graph samples sized by a pilot,
#                                                  then the profiler's GPU test
#   bash benchmarks/device_run_kernels.sh pilot2   the collectives at 256 KiB with the pilot; inter-SM GEMM + all-reduce
#                                                  at llama3-70b-tp8 with 8 communication SMs
#   bash benchmarks/device_run_kernels.sh cap21    the collectives at 256 KiB and 1 MiB with at most 21 calls per sample
#   bash benchmarks/device_run_kernels.sh seventh  the per-shape inter-SM CTAs on the GPUs at four shapes,
#                                                  the fused kernels at two more tiny shapes
#   bash benchmarks/device_run_kernels.sh fixed    GPU test of the copy-engine GEMM + all-reduce's two paths, fused
#                                                  kernels at shapes the fixed costs were not fitted on
#   bash benchmarks/device_run_kernels.sh deepseek the fused GEMMs at deepseek-v3-dense-tp8; two records outside ±15% again
#   bash benchmarks/device_run_kernels.sh eighth   GEMM rates by shape and calls per sample (benchmarks/gemm_rates.py),
#                                                  the copy-engine pipeline with and without its local work, the
#                                                  collectives at 1 GiB and 512 MiB
#   bash benchmarks/device_run_kernels.sh eighth2  the probe's sustained matmul rate, halving copy-engine chunks,
#                                                  probe and profiler GPU tests, collectives at 1 GiB and 512 MiB
#   bash benchmarks/device_run_kernels.sh ninth    probe and profiler GPU tests, the collectives at 64 MiB and 256 MiB
#                                                  with the halving copy-engine chunks (now the default)
#   bash benchmarks/device_run_kernels.sh ninth2   copy-engine collectives at 1 GiB, 1 or 3 calls per sample; the
#                                                  collectives at 512 MiB (all: the eighth2 call's timeout cut two)
#   bash benchmarks/device_run_kernels.sh ninth3   copy-engine collectives at 1 GiB by local work and calls per
#                                                  sample; references of the problems without built-in kernels
#   bash benchmarks/device_run_kernels.sh ninth4   the copy-engine gathers with their own row after the peers'
#                                                  credits: 1 and 3 calls per sample, the profiler at 64 MiB-1 GiB
#   bash benchmarks/device_run_kernels.sh ninth5   the ninth4 gathers at 64 MiB and 512 MiB again, one results file
#   bash benchmarks/device_run_kernels.sh ninth6   the collectives at 100000004 bytes (odd halving chunks) on GPUs
#   bash benchmarks/device_run_kernels.sh tenth    (written 2026-12-01 on a one-GPU day, not yet run) GPU tests with
#                                                  the per-rank GPU state, two copy streams against one and the
#                                                  gathers' copy-out on 32/64 CTAs at 256/512 MiB, the collectives at
#                                                  512 MiB through the profiler on two copy streams
#   bash benchmarks/device_run_kernels.sh eleventh (written 2026-12-01 on a one-GPU day, not yet run) the fused
#                                                  kernels after their side-stream refactor, on 2 real ranks; the
#                                                  copy-engine overlaps at the shapes whose records moved the model
#                                                  (benchmarks/2026-12-01-model-ce-overlap.md): its out-of-sample check
#   bash benchmarks/device_run_kernels.sh inplace  (written 2026-12-01, not yet run) the all-reduce at 16 KiB, 256 KiB,
#                                                  1 MiB and 64 MiB with NCCL in place beside the reference, which
#                                                  copies its input first (benchmarks/2026-12-01-reference-copy.md),
#                                                  and the LL kernels (2026-12-01-low-latency.md): up to 1 MiB and
#                                                  the decode GEMV + all-reduce at llama3-70b-tp8
#   bash benchmarks/device_run_kernels.sh inplace-short  the same at 256 KiB and 16 KiB and the decode GEMV (≤ 280 s)
#   bash benchmarks/device_run_kernels.sh ll       (written 2026-12-01, not yet run) all-gather, reduce-scatter and
#                                                  all-to-all at 256 KiB and 16 KiB: their LL kernels beside the push
#                                                  kernels and NCCL (≤ 420 s)
#   bash benchmarks/device_run_kernels.sh ll-gemm  (written 2026-12-01, not yet run) the three tensor-parallel GEMMs at
#                                                  the suite's small shape, where the serial LL GEMMs run unasked
#                                                  beside the fused kernels (≤ 360 s)
#   bash benchmarks/device_run_kernels.sh ceiling2 (written 2026-12-01, not yet run) the both-ways ceiling with the bytes
#                                                  split over two engines at once: two DMAs, or a DMA beside SM
#                                                  stores (benchmarks/bidir_ceiling.py), at 16-128 MiB (≤ 150 s)
#   bash benchmarks/device_run_kernels.sh group    (written 2026-12-01, not yet run) the inter-SM GEMM + all-reduce with
#                                                  its GEMM's tiles in groups of 8 bands against row-major, at
#                                                  llama3-8b-tp2 and llama3-70b-tp8 (benchmarks/inter_sm_sweep.py),
#                                                  then the profiler with PKROOF_INTER_SM_GROUP=8 (≤ 560 s)
#   bash benchmarks/device_run_kernels.sh small    all-gather and all-to-all at 256 KiB with 2 ms graph samples
#   bash benchmarks/device_run_kernels.sh time     the issue-5 evidence: collectives at 64 MiB and 256 KiB beside
#                                                  NCCL and torch symm_mem, GEMM + all-reduce, emulated-rank tests
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
if [ "${1:-check}" = check ]; then
  timeout 170 python3 -m pytest -q -p no:cacheprovider -x tests/test_kernels_gpu.py 2>&1 | tee "$OUT/kernel-tests.log" | tail -25
  step odd-ar 60 all-reduce --size 1000002  # 500001 elements: not a multiple of the tile nor of 2 ranks
  step odd 120 all-gather reduce-scatter all-to-all --size 1000004  # chunks of 250001 elements
  step fused-small 90 $F
  step big 140 $C --size 64MiB
elif [ "$1" = tma ]; then  # next session: the TMA pushes (interpreter- and PTX-checked only so far)
  timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k tma 2>&1 | tee "$OUT/tma-tests.log" | tail -5
  for p in all-reduce all-gather reduce-scatter all-to-all; do  # one results file, one log (8 files come back)
    for s in 64MiB 256KiB 1000480; do  # 1000480 B: 16-byte aligned chunks of whole 256-element rows plus a tail
      echo "== pkroof profile $p --size $s --impl pkroof-$p-tma" | tee -a "$OUT/tma.log"
      timeout 60 python3 -m pkroof profile $p --size $s --impl pkroof-$p-tma --timeout 30 --resume --out "$OUT/tma" \
        2>&1 | grep -v -e Warning -e 'return func' | tee -a "$OUT/tma.log"
    done
  done
elif [ "$1" = variants ]; then  # GPU tests, then the tuning sweeps (rows print as measured)
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py 2>&1 | tee "$OUT/gpu-tests.log" \
    | tail -4
  sweep() { timeout "$1" python3 benchmarks/kernels_sweep.py "${@:2}" 2>&1 | grep -v Warning | tee -a "$OUT/sweeps.log"; }
  sweep 60 64MiB --ce-chunks 4,8,16
  sweep 75 64MiB --modes push,split --blocks 4096,16384 --ctas 128,256
  sweep 110 1MiB 256KiB --modes push,split --ctas 16,32,64,128,256
  sweep 45 64MiB --modes tma --ctas 16,32,64
elif [ "$1" = final ]; then  # the issue-5 evidence with the swept defaults, then the profiler's GPU test
  begin=$(date +%s)
  prof() {  # prof LOG SECONDS ARGS...: append to one results folder and one log (8 files come back)
    local log=$1 secs=$2; shift 2
    echo "== pkroof profile $*" | tee -a "$OUT/$log.log"
    timeout "$secs" python3 -m pkroof profile "$@" --timeout 60 --resume --out "$OUT/$log" 2>&1 \
      | grep -v -e Warning -e 'return func' | tee -a "$OUT/$log.log"
  }
  prof coll 190 $C --size 64MiB
  prof coll 170 $C --size 256KiB
  prof fused 50 gemm-all-reduce --shape llama3-8b-tp2
  prof fused 110 gemm-reduce-scatter all-gather-gemm --shape llama3-70b-tp8
  left=$(( 570 - ($(date +%s) - begin) ))
  echo "== tests/test_profiler_gpu.py with ${left} s left"
  [ "$left" -gt 20 ] && timeout "$left" python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py \
    > "$OUT/gpu-tests.log" 2>&1; tail -3 "$OUT/gpu-tests.log"
elif [ "$1" = next ]; then  # written for the next session, not yet run: what this session's runs left open
  sweep() { timeout "$1" python3 benchmarks/kernels_sweep.py "${@:2}" 2>&1 | grep -v Warning | tee -a "$OUT/sweeps.log"; }
  sweep 60 64MiB --ce-chunks 16 --ce-local dma,sm  # copy-out of all-gather / all-to-all by SMs instead of DMA
  sweep 90 64MiB --modes tma --blocks 4096,16384,32768 --ctas 16,32,64  # bigger boxes (32768: 128 KiB of smem)
  sweep 60 64MiB --modes pull --blocks 16384,65536 --ctas 128,256  # pull all-reduce's +18% against the model
  prof() {
    local log=$1 secs=$2; shift 2
    echo "== pkroof profile $*" | tee -a "$OUT/$log.log"
    timeout "$secs" python3 -m pkroof profile "$@" --timeout 60 --resume --out "$OUT/$log" 2>&1 \
      | grep -v -e Warning -e 'return func' | tee -a "$OUT/$log.log"
  }
  prof coll 170 $C --size 1MiB  # the suite's default size, with the new defaults (+53% to +143% with the old)
  prof coll 150 $C --size 1000480  # awkward size: every automatic variant through the real two-GPU check
elif [ "$1" = align ]; then  # 2026-11-30, fifth session: the profiler's samples start together on every GPU
  timeout 180 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py tests/test_probe_gpu.py 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -4
  timeout 170 python3 benchmarks/timing_align_ab.py 256KiB 1MiB 2>&1 | grep -v Warning | tee "$OUT/align-ab.log"
  step coll256k 200 $C --size 256KiB
elif [ "$1" = intersm ]; then  # 2026-11-30, fifth session
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k inter_sm 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -4
  timeout 220 python3 benchmarks/inter_sm_sweep.py llama3-8b-tp2 2>&1 | grep -v Warning | tee "$OUT/sweep.log"
  step fused-ar 170 gemm-all-reduce --shape llama3-8b-tp2 --impl pkroof-gemm-ar-carveout
elif [ "$1" = intersm2 ]; then  # 2026-11-30, fifth session
  timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k inter_sm 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -4
  timeout 200 python3 benchmarks/inter_sm_sweep.py llama3-8b-tp2 --comm 4,8,12,16 --blocks 16384,32768 \
    --tiles 128x256x64x3x8,128x256x64x4x8 2>&1 | grep -v Warning | tee "$OUT/sweep.log"
  # the fastest correct configuration: "inter-SM TILE COMM comm BLOCK block TIME µs ..."
  best=$(awk '$1 == "inter-SM" && $8 == "µs" {print $7, $2, $3, $5}' "$OUT/sweep.log" | sort -n | head -1)
  echo "best: $best"
  if [ -n "$best" ]; then
    read -r _ tile comm block <<< "$best"
    export PKROOF_INTER_SM_TILE=${tile//x/,} PKROOF_INTER_SM_CTAS=$comm PKROOF_INTER_SM_BLOCK=$block
  fi
  step fused-ar 100 gemm-all-reduce --shape llama3-8b-tp2 --impl pkroof-gemm-ar-carveout
  step fused-ar70 90 gemm-all-reduce --shape llama3-70b-tp8
  unset PKROOF_INTER_SM_TILE PKROOF_INTER_SM_CTAS PKROOF_INTER_SM_BLOCK
  step coll256k 180 $C --size 256KiB
elif [ "$1" = intersm3 ]; then  # 2026-11-30, fifth session
  for shape in llama3-8b-tp2 llama3-70b-tp8; do
    timeout 150 python3 benchmarks/inter_sm_sweep.py $shape --comm 4,8,16 --warps 16,32 --blocks 32768 \
      --tiles 128x256x64x4x8 2>&1 | grep -v Warning | tee "$OUT/sweep-$shape.log"
  done
  # the configuration with the best speed-up over matmul + NCCL summed over both shapes
  best=$(python3 - "$OUT"/sweep-*.log <<'PY'
import collections, re, sys
total, seen = collections.Counter(), collections.Counter()
for path in sys.argv[1:]:
    for line in open(path):
        m = re.match(r"\s*inter-SM (\S+)\s+(\d+) comm\s+(\d+) block\s+(\d+) warps\s+\S+ µs\s+([\d.]+)x", line)
        if m:
            total[m.groups()[:4]] += float(m.group(5))
            seen[m.groups()[:4]] += 1
both = [k for k in total if seen[k] == len(sys.argv[1:])]
if both:
    print(*max(both, key=total.__getitem__))
PY
)
  echo "best on both shapes (tile comm block warps): $best"
  if [ -n "$best" ]; then
    read -r tile comm block warps <<< "$best"
    export PKROOF_INTER_SM_TILE=${tile//x/,} PKROOF_INTER_SM_CTAS=$comm PKROOF_INTER_SM_BLOCK=$block
    export PKROOF_INTER_SM_WARPS=$warps
  fi
  step fused-ar 100 gemm-all-reduce --shape llama3-8b-tp2
  step fused-ar70 80 gemm-all-reduce --shape llama3-70b-tp8
  unset PKROOF_INTER_SM_TILE PKROOF_INTER_SM_CTAS PKROOF_INTER_SM_BLOCK PKROOF_INTER_SM_WARPS
  step coll256k-a 60 all-gather all-to-all --size 256KiB
  step coll256k-b 60 all-gather all-to-all --size 256KiB
elif [ "$1" = intersm4 ]; then  # 2026-11-30, fifth session: the shipped settings
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k inter_sm 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -4
  for shape in small llama3-8b-tp2 llama3-70b-tp8; do  # one results file
    echo "== pkroof profile gemm-all-reduce --shape $shape" | tee -a "$OUT/fused-ar.log"
    timeout 80 python3 -m pkroof profile gemm-all-reduce --shape $shape --timeout 60 --resume --out "$OUT/fused-ar" \
      2>&1 | grep -v -e Warning -e 'return func' | tee -a "$OUT/fused-ar.log"
  done
elif [ "$1" = pilot ]; then  # 2026-11-30, sixth session: the suite with graph samples sized by a graph pilot
  problems=$(python3 -m pkroof problems | tail -n +3 | awk '{print $1}')
  timeout 440 python3 -m pkroof profile $problems --timeout 120 --resume --out "$OUT/suite" 2>&1 \
    | grep -v -e Warning -e 'return func' | tee "$OUT/suite.log"
  timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py 2>&1 | tee "$OUT/gpu-tests.log" \
    | tail -4
elif [ "$1" = pilot2 ]; then  # 2026-11-30, sixth session: 256 KiB with the pilot; inter-SM at 70b with 8 comm SMs
  step coll256k 270 $C --size 256KiB
  echo "== PKROOF_INTER_SM_CTAS=8 pkroof profile gemm-all-reduce --shape llama3-70b-tp8" | tee "$OUT/ar70-k8.log"
  PKROOF_INTER_SM_CTAS=8 timeout 150 python3 -m pkroof profile gemm-all-reduce --shape llama3-70b-tp8 \
    --impl pkroof-gemm-ar-inter-sm --timeout 90 --out "$OUT/ar70-k8" 2>&1 | grep -v -e Warning -e 'return func' \
    | tee -a "$OUT/ar70-k8.log"
elif [ "$1" = cap21 ]; then  # the collectives at 256 KiB and at the suite's 1 MiB with at most 21 calls per sample
  # (nccl-tests: 20 iterations). Sixth session: run as two device calls, one line each (calls 4 and 5)
  step coll256k 200 $C --size 256KiB
  step coll1m 200 $C
elif [ "$1" = seventh ]; then  # 2026-11-30, seventh session, first call: the per-shape inter-SM CTAs as code on the
  # GPUs, the fused kernels at two tiny shapes (a per-schedule fixed cost needs at least two shapes to be measured)
  begin=$(date +%s) budget=570
  timeout 110 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k inter_sm 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -4
  for tokens in 128 512; do
    fprof 110 $F -p tokens=$tokens -p in_features=1024 -p out_features=512
  done
  for shape in llama3-8b-tp2 llama3-70b-tp8 llama3-70b-tp8-o-proj small; do
    fprof 90 gemm-all-reduce --shape $shape
  done
elif [ "$1" = fixed ]; then  # 2026-11-30, seventh session, last call: the copy-engine GEMM + all-reduce's new
  # one-shot path (GPU test: both paths), then fused kernels at shapes the fixed costs were not fitted on
  begin=$(date +%s) budget=520
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py -k copy_engine 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -4
  fprof 120 $F -p tokens=256 -p in_features=2048 -p out_features=1024
  for tokens in 128 512; do
    fprof 50 gemm-all-reduce --impl pkroof-gemm-ar-ce -p tokens=$tokens -p in_features=1024 -p out_features=512
  done
  fprof 50 gemm-all-reduce --impl pkroof-gemm-ar-ce --shape small
  fprof 120 $F -p tokens=1024 -p in_features=4096 -p out_features=2048
elif [ "$1" = deepseek ]; then  # 2026-11-30, seventh session, last minutes: the one suite tensor-parallel shape the
  # fused GEMMs never ran at, then the two records outside ±15% of the model again (run-to-run spread)
  begin=$(date +%s) budget=400 impl_timeout=90
  fprof 220 gemm-reduce-scatter all-gather-gemm --shape deepseek-v3-dense-tp8
  fprof 60 gemm-all-reduce -p tokens=256 -p in_features=2048 -p out_features=1024
  fprof 60 reduce-scatter
elif [ "$1" = small ]; then  # 2026-11-30, fifth session: the last minutes of device time
  step coll256k 110 all-gather all-to-all --size 256KiB
elif [ "$1" = verify ]; then  # 2026-11-30, fourth session: what changed since the last GPU run, then the ceilings
  sweep() { timeout "$1" python3 benchmarks/kernels_sweep.py "${@:2}" 2>&1 | grep -v Warning | tee -a "$OUT/sweeps.log"; }
  timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py tests/test_profiler_gpu.py \
    tests/test_probe_gpu.py 2>&1 | tee "$OUT/gpu-tests.log" | tail -6
  timeout 120 python3 benchmarks/bidir_ceiling.py 2>&1 | grep -v Warning | tee "$OUT/bidir.log"
  sweep 80 64MiB --modes tma --blocks 16384,32768 --ctas 16,32,64,128
  sweep 60 64MiB --ce-chunks 16 --ce-local dma,sm
elif [ "$1" = big ]; then
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py -k split_roles 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -2
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py tests/test_probe_gpu.py 2>&1 \
    | tee -a "$OUT/gpu-tests.log" | tail -2
  timeout 50 python3 benchmarks/ce_timeline.py 64MiB /tmp 2>&1 | grep -v Warning | tee "$OUT/timeline.log"
  step big256 300 $C --size 256MiB
elif [ "$1" = last ]; then
  t=tests/test_kernels_gpu.py::test_emulated_ranks_split_roles
  timeout 110 python3 -m pytest -q -p no:cacheprovider "$t[8-all-gather-push]" "$t[8-reduce-scatter-pull]" \
    "$t[8-reduce-scatter-push]" "$t[8-all-to-all-pull]" "$t[8-all-to-all-push]" 2>&1 | tee "$OUT/split8.log" | tail -2
  step gather64 130 all-gather all-to-all --size 64MiB
  step rest256 200 reduce-scatter all-to-all --size 256MiB
elif [ "$1" = odd ]; then  # the variants through the profiler's correctness check on the real ranks
  for p in all-reduce all-gather reduce-scatter all-to-all; do  # 1000480 B: a tail after whole TMA rows
    echo "== pkroof profile $p --size 1000480 (+ tma, split)" | tee -a "$OUT/odd.log"
    timeout 45 python3 -m pkroof profile $p --size 1000480 --impl pkroof-$p-tma --impl pkroof-$p-split \
      --impl pkroof-$p-ce --timeout 30 --resume --out "$OUT/odd" 2>&1 | grep -v -e Warning -e 'return func' \
      | tee -a "$OUT/odd.log"
  done
elif [ "$1" = eighth ]; then  # 2026-11-30, eighth session: the GEMM rate by shape and by busy time; where 90% of
  # the roofline becomes reachable (512 MiB, 1 GiB); the copy-engine pipeline without its local work
  timeout 150 python3 benchmarks/gemm_rates.py 2>&1 | grep -v Warning | tee "$OUT/gemm-rates.log"
  timeout 100 python3 benchmarks/kernels_sweep.py 256MiB --ce-chunks 8,16,32,64 --ce-local sm,none 2>&1 \
    | grep -v Warning | tee "$OUT/ce-sweep.log"
  timeout 60 python3 benchmarks/kernels_sweep.py 1GiB --ce-chunks 32,64 --ce-local sm,none 2>&1 \
    | grep -v Warning | tee -a "$OUT/ce-sweep.log"
  step big1g 170 $C --size 1GiB
  step big512 110 $C --size 512MiB
elif [ "$1" = eighth2 ]; then  # the probe's sustained matmul rate, the halving copy-engine chunks against equal
  # ones, GPU tests (probe, profiler), the collectives at 1 GiB and 512 MiB with inputs drawn on the GPUs
  timeout 60 python3 benchmarks/gemm_rates.py --probe 2>&1 | grep -v Warning | tee "$OUT/probe-rates.log"
  timeout 90 python3 benchmarks/kernels_sweep.py 64MiB 256MiB 1GiB --ce-chunks 0,16,32 --ce-local sm 2>&1 \
    | grep -v Warning | tee "$OUT/ce-sweep.log"
  export PKROOF_CE_SCHEDULE=halving  # the profiled copy-engine kernels use the halving chunks (the sweep compares)
  step big1g 200 $C --size 1GiB
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_probe_gpu.py tests/test_profiler_gpu.py 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -3
  step big512 120 $C --size 512MiB
elif [ "$1" = ninth ]; then  # the records the halving copy-engine chunks change (64 MiB, 256 MiB), GPU tests first
  timeout 220 python3 -m pytest -q -p no:cacheprovider tests/test_probe_gpu.py tests/test_profiler_gpu.py 2>&1 \
    | tee "$OUT/gpu-tests.log" | tail -3
  step big64 150 $C --size 64MiB
  step big256 200 $C --size 256MiB
elif [ "$1" = ninth2 ]; then  # and: are the copy-engine gathers slower 3 calls per sample (the profiler's) than 1?
  timeout 60 python3 benchmarks/kernels_sweep.py 1GiB --ce-chunks 0 --ce-local sm --ce-calls 1,3 2>&1 \
    | grep -v Warning | tee "$OUT/ce-calls.log"
  step big512 400 $C --size 512MiB
elif [ "$1" = ninth3 ]; then  # the gathers' 3-call slowdown by local work; the problems whose inputs are now drawn on
  # the GPUs, references only (the suite's other problems ran in ninth / ninth2 and the GPU tests)
  timeout 150 python3 benchmarks/kernels_sweep.py 1GiB --ce-chunks 0 --ce-local sm,dma,none --ce-calls 1,3 2>&1 \
    | grep -v Warning | tee "$OUT/ce-calls.log"
  P="all-reduce-rmsnorm all-to-allv ddp-bucket-all-reduce decode-gemv-all-reduce distributed-topk embedding-lookup
     fsdp-all-gather-params fsdp-reduce-scatter-grads halo-exchange moe-combine moe-dispatch reduce-scatter-rmsnorm
     ring-attention ulysses-all-to-all-out ulysses-all-to-all-qkv vocab-parallel-cross-entropy
     vocab-parallel-logprobs-topk zero-reduce-scatter-then-all-gather broadcast gather scatter reduce send-recv
     tp-mlp-sequence-parallel"
  step suite 380 $P
elif [ "$1" = ninth4 ]; then  # the gathers' own row after the peers' credits: 1 and 3 calls per sample, then the
  # gathers through the profiler at every size recorded
  timeout 100 python3 benchmarks/kernels_sweep.py 1GiB 64MiB --ce-chunks 0 --ce-local sm --ce-calls 1,3 2>&1 \
    | grep -v Warning | tee "$OUT/ce-calls.log"
  for s in 64MiB 256MiB 512MiB 1GiB; do step "gathers$s" 120 all-gather all-to-all --size $s; done
elif [ "$1" = ninth5 ]; then  # the ninth4 gathers at 64 MiB and 512 MiB again, into one results file (a call
  # brings back at most 8 files: ninth4's two were left behind)
  for s in 64MiB 512MiB; do
    timeout 150 python3 -m pkroof profile all-gather all-to-all --size $s --timeout 60 --resume --out "$OUT/gathers" \
      2>&1 | grep -v -e Warning -e 'return func' | tee -a "$OUT/gathers.log"
  done
elif [ "$1" = tenth ]; then
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py tests/test_gpu_state.py \
    tests/test_copy_engine_gpu.py > "$OUT/gpu-tests.log" 2>&1; tail -3 "$OUT/gpu-tests.log"
  # halving chunks, SM copy-out, 3 calls per sample (the profiler's at these sizes); rows print as measured
  # and the gathers' copy-out on 32 or 64 CTAs (spread over the DMAs rather than a full-grid burst; on one H200 a
  # 64 MiB copy took 33.9 µs on the full grid, 158.9 on 16 CTAs: too slow to hide, data/2026-12-01-tenth/call8-*)
  timeout 200 python3 benchmarks/kernels_sweep.py 256MiB 512MiB --ce-chunks 0 --ce-local sm,sm32,sm64,none \
    --ce-calls 3 --ce-streams 1,2 2>&1 | grep -v Warning | tee "$OUT/ce-streams.log"
  export PKROOF_CE_STREAMS=2  # the records list it among their settings
  step streams2 220 all-gather reduce-scatter all-to-all --size 512MiB
  unset PKROOF_CE_STREAMS
elif [ "$1" = inplace-short ]; then  # what fits in 300 s of device time: the two smallest sizes and the decode GEMV
  step inplace-256KiB 120 all-reduce --size 256KiB
  step inplace-16KiB 100 all-reduce --size 16KiB
  step decode-70b 60 decode-gemv-all-reduce --shape llama3-70b-tp8
elif [ "$1" = ceiling2 ]; then  # is 85.7% at 32 MiB each way the copy engine's limit or the link's?
  PKROOF_CEILING_WAYS=split timeout 150 python3 benchmarks/bidir_ceiling.py 16 32 64 128 2>&1 | grep -v Warning \
    | tee "$OUT/ceiling-split.log"
elif [ "$1" = group ]; then  # 2026-12-01-tile-order.md: the GEMM alone gained 7-8% at 70b on one H200; the fused?
  timeout 170 python3 benchmarks/inter_sm_sweep.py llama3-8b-tp2 --comm 16 --tiles 128x256x64x4x8,128x256x64x3x8 \
    --groups 1,8 2>&1 | grep -v Warning | tee "$OUT/group-8b.log"
  timeout 190 python3 benchmarks/inter_sm_sweep.py llama3-70b-tp8 --comm 8,12 --tiles 128x256x64x4x8,128x256x64x3x8 \
    --groups 1,8 2>&1 | grep -v Warning | tee "$OUT/group-70b.log"
  begin=$(date +%s) budget=200
  export PKROOF_INTER_SM_GROUP=8  # the records list it among their settings
  fprof 90 gemm-all-reduce --impl pkroof-gemm-ar-inter-sm --shape llama3-8b-tp2
  fprof 110 gemm-all-reduce --impl pkroof-gemm-ar-inter-sm --shape llama3-70b-tp8
  unset PKROOF_INTER_SM_GROUP
elif [ "$1" = ll ]; then
  step ll-256KiB 240 all-gather reduce-scatter all-to-all --size 256KiB
  step ll-16KiB 180 all-gather reduce-scatter all-to-all --size 16KiB
elif [ "$1" = ll-gemm ]; then
  step ll-gemm 360 gemm-reduce-scatter all-gather-gemm gemm-all-reduce
elif [ "$1" = inplace ]; then
  for size in 16KiB 256KiB 1MiB; do
    step "inplace-$size" 120 all-reduce --size $size
  done
  step inplace-64MiB 150 all-reduce --size 64MiB
  step decode-70b 60 decode-gemv-all-reduce --shape llama3-70b-tp8  # 570 s at most
elif [ "$1" = eleventh ]; then
  begin=$(date +%s) budget=560
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_profiler_gpu.py tests/test_copy_engine_gpu.py \
    > "$OUT/gpu-tests.log" 2>&1; tail -3 "$OUT/gpu-tests.log"
  fprof 120 $F -p tokens=256 -p in_features=2048 -p out_features=1024
  fprof 120 $F -p tokens=1024 -p in_features=4096 -p out_features=2048
  for tokens in 128 512; do
    fprof 50 gemm-all-reduce --impl pkroof-gemm-ar-ce -p tokens=$tokens -p in_features=1024 -p out_features=512
  done
elif [ "$1" = ninth6 ]; then  # the halving chunks on GPUs at a size whose first chunk is an odd remainder: 100000004
  # bytes, 25000001 elements per rank and peer (not a multiple of 64, nor of the world size)
  step odd100m 200 $C --size 100000004
elif [ "$1" = blocks ]; then  # next session: does a larger block (more bytes in flight per thread) help?
  timeout 400 python3 benchmarks/kernels_sweep.py 64MiB 256KiB --blocks 4096,8192,16384 2>&1 | grep -v Warning \
    | tee "$OUT/sweep-blocks.log"
elif [ "$1" = sweep ]; then
  timeout 130 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py 2>&1 | tee "$OUT/kernel-tests.log" | tail -25
  timeout 150 python3 benchmarks/kernels_sweep.py 64MiB 256KiB 2>&1 | grep -v Warning | tee "$OUT/sweep.log"
  step fused 170 $F --shape llama3-8b-tp2
else  # time
  step big 170 $C --size 64MiB
  step small 150 $C --size 256KiB
  step gemm-ar 60 gemm-all-reduce --shape llama3-8b-tp2
  timeout 70 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_gpu.py 2>&1 | tee "$OUT/kernel-tests.log" | tail -25
  timeout 45 python3 benchmarks/kernels_sweep.py 64MiB 2>&1 | grep -v Warning | tee "$OUT/sweep.log"
fi
