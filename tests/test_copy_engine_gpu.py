"""The copy-engine collectives on one GPU with emulated ranks (tests/emulate_ce.py): real DMAs, flag kernels and
streams, 2-8 ranks, both chunk schedules, one or two copy streams, SM or DMA copy-out, eager and in CUDA graphs."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def test_copy_engine_collectives_on_emulated_ranks():
    script = Path(__file__).with_name("emulate_ce.py")
    # its own process: CUDA_DEVICE_MAX_CONNECTIONS must be set before CUDA starts
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    lines = [line for line in run.stdout.splitlines() if not line.startswith("#")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-3000:]
    assert all(line.startswith("ok") for line in lines), [line for line in lines if not line.startswith("ok")]
    # every collective, eager at 2, 3 and 4 ranks x 2 schedules x 1-2 copy streams x 2 copy-outs and at 8 ranks
    # with one copy stream; in CUDA graphs at 2, 3 and 4 ranks x 1-2 copy streams
    eager, graph = [line for line in lines if " eager " in line], [line for line in lines if " graph " in line]
    assert len(eager) == 4 * (3 * 2 * 2 * 2 + 2 * 2) and len(graph) == 4 * 3 * 2


def test_copy_engine_overlaps_on_emulated_ranks():
    script = Path(__file__).with_name("emulate_fused.py")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    lines = [line for line in run.stdout.splitlines() if not line.startswith("#")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-3000:]
    assert all(line.startswith("ok") for line in lines), [line for line in lines if not line.startswith("ok")]
    # five cases (the one-shot GEMM + all-reduce in bf16 and fp32), eager at 2, 3, 4 and 8 ranks, in CUDA graphs at
    # 2, 3 and 4
    assert len([line for line in lines if " eager " in line]) == 5 * 4
    assert len([line for line in lines if " graph " in line]) == 5 * 3
