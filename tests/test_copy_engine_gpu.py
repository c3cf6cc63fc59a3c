"""The copy-engine collectives on one GPU with emulated ranks (tests/emulate_ce.py): real DMAs, flag kernels and
streams, 2-8 ranks, both chunk schedules, one or two copy streams, a lane of them per peer or one, SM or DMA
copy-out, eager and in CUDA graphs; the copy-engine overlaps of kernels/fused.py the same way (emulate_fused.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def _emulated(script: str) -> tuple[list[str], list[str]]:
    """Run tests/`script` in its own process (CUDA_DEVICE_MAX_CONNECTIONS must be set before CUDA starts); every case
    must be ok. Its (eager, graph) case lines."""
    run = subprocess.run(
        [sys.executable, str(Path(__file__).with_name(script))], capture_output=True, text=True, timeout=600
    )
    lines = [line for line in run.stdout.splitlines() if not line.startswith("#")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-3000:]
    assert all(line.startswith("ok") for line in lines), [line for line in lines if not line.startswith("ok")]
    return [line for line in lines if " eager " in line], [line for line in lines if " graph " in line]


def test_copy_engine_collectives_on_emulated_ranks():
    eager, graph = _emulated("emulate_ce.py")
    # every collective x 2 schedules x 2 copy-outs, eager, at each (ranks, copy streams, a lane per peer or one)
    # whose streams fit (emulate_ce._fits: ranks x (2 + streams x lanes) <= 24): 2 ranks (lanes are one): 1-2
    # streams; 3 ranks: 1-2 streams x both; 4 ranks: 1 stream x both, 2 streams on one lane; 8 ranks: 1 stream on
    # one lane. That is 2 + 4 + 3 + 1 = 10 settings; in CUDA graphs the 9 at 2-4 ranks, default schedule and copy-out
    assert len(eager) == 4 * 10 * 2 * 2 and len(graph) == 4 * 9


def test_copy_engine_overlaps_on_emulated_ranks():
    eager, graph = _emulated("emulate_fused.py")
    # five cases (the one-shot GEMM + all-reduce in bf16 and fp32), eager at 2, 3, 4 and 8 ranks, in CUDA graphs at
    # 2, 3 and 4
    assert len(eager) == 5 * 4 and len(graph) == 5 * 3
