#!/usr/bin/env bash
# Issue 6's main job on the GPU node: `pkroof report --run` (probe this node, profile the whole suite, report)
# in one device call. Carry .whl (plotly's wheel: the image lacks plotly) and .tmprun (so a second call resumes):
#   bash benchmarks/suite/device_run_report.sh [seconds]
# Back under $OUT: the run's log, the GPUs' state, and report.tar.gz (the report folder and its data folder).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site || exit 1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpus.csv"
mkdir -p .tmprun
start=$(date +%s)
timeout "${1:-520}" python3 -m pkroof report --run --out .tmprun/report 2>&1 \
  | grep -v -e Warning -e 'return func' | tee "$OUT/report-run.log"
echo "report --run exit: ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s" | tee -a "$OUT/report-run.log"
tar czf "$OUT/report.tar.gz" -C .tmprun report report-data 2>/dev/null || tar czf "$OUT/report.tar.gz" -C .tmprun report-data
