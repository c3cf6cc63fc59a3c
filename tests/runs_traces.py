"""Kineto-format traces made in the test: GPU kernels at the times a test chooses, each launched by a runtime call
(correlation id) from inside an operator, within ProfilerStep spans, as torch.profiler writes them (PyTorch 2.x).

    t = Synthetic(rank=0, world=2)
    t.step(1, 0, 100)
    t.kernel("ampere_sgemm_128x64_tn", 10, 20, op="aten::mm", dims=[[64, 32], [32, 16]], types=["float", "float"])
    t.write(tmp_path / "rank0.json")
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

H100 = {"name": "NVIDIA H100 80GB HBM3", "numSms": 132, "computeMajor": 9, "computeMinor": 0}
PID, TID = 1234, 1234


def nccl_args(collective: str, nelems: int, dtype: str, ranks: list[int], *, out: int | None = None) -> dict:
    """A collective's arguments as PyTorch 2.x records them on an NCCL kernel."""
    return {
        "Collective name": collective,
        "In msg nelems": nelems,
        "Out msg nelems": nelems if out is None else out,
        "Group size": len(ranks),
        "dtype": dtype,
        "In split size": "[]",
        "Out split size": "[]",
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": json.dumps(ranks),
    }


class Synthetic:
    def __init__(self, rank: int, world: int, *, device: dict | None = H100, pg_ranks: list[int] | None = None):
        pg = pg_ranks if pg_ranks is not None else list(range(world))
        self.doc: dict = {
            "schemaVersion": 1,
            "deviceProperties": [dict(device, id=0)] if device else [],
            "distributedInfo": {
                "backend": "nccl",
                "rank": rank,
                "world_size": world,
                "pg_count": 1,
                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": len(pg), "ranks": pg}],
                "nccl_version": "2.21.5",
            },
            "traceEvents": [],
        }
        self._next = 1

    def _add(self, **event: object) -> None:
        self.doc["traceEvents"].append({"ph": "X", **event})

    def step(self, n: int, start: float, end: float) -> None:
        self._add(cat="user_annotation", name=f"ProfilerStep#{n}", pid=PID, tid=TID, ts=start, dur=end - start)

    def kernel(
        self,
        name: str,
        start: float,
        dur: float,
        *,
        launch: float | None = None,
        stream: int = 7,
        op: str | None = None,
        dims: list | None = None,
        types: list | None = None,
        args: dict | None = None,
        cat: str = "kernel",
        graph: int | None = None,
    ) -> int:
        """A kernel (or gpu_memcpy/gpu_memset with `cat`) on `stream` at [start, start + dur), launched at `launch`
        (default: 1 µs before it starts) from inside `op` (with its Input Dims and Input type). `graph`: the
        correlation id of an earlier cudaGraphLaunch that replays it (no launch or operator of its own)."""
        if graph is not None:
            corr = graph
        else:
            corr = self._next
            self._next += 1
            at = start - 1 if launch is None else launch
            if op is not None:
                op_args: dict = {"External id": corr}
                if dims is not None:
                    op_args |= {"Input Dims": dims, "Input type": types or []}
                self._add(cat="cpu_op", name=op, pid=PID, tid=TID, ts=at - 0.5, dur=1.0, args=op_args)
            self._add(
                cat="cuda_runtime",
                name="cudaLaunchKernel",
                pid=PID,
                tid=TID,
                ts=at,
                dur=0.2,
                args={"External id": corr, "correlation": corr},
            )
        kernel_args = {"External id": corr, "device": 0, "stream": stream, "correlation": corr} | (args or {})
        self._add(cat=cat, name=name, pid=0, tid=stream, ts=start, dur=dur, args=kernel_args)
        return corr

    def graph_launch(self, at: float) -> int:
        """A cudaGraphLaunch at `at`: its correlation id, which the graph's kernels carry."""
        corr = self._next
        self._next += 1
        self._add(
            cat="cuda_runtime", name="cudaGraphLaunch", pid=PID, tid=TID, ts=at, dur=5.0, args={"correlation": corr}
        )
        return corr

    def write(self, path: Path, *, gz: bool = False) -> Path:
        data = json.dumps(self.doc).encode()
        path.write_bytes(gzip.compress(data) if gz else data)
        return path


def profile_gloo_rank(rank: int, world: int, folder: str) -> str:
    """Under torch.profiler (CPU activity, record_shapes, a schedule of 2 active steps) run a matmul and an
    all-reduce over gloo for 3 steps; export this rank's Chrome trace to `folder`/rank<rank>.json."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    path = str(Path(folder) / f"rank{rank}.json")
    x = torch.ones(64, 32)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(path),
    ) as prof:
        for _ in range(3):
            y = x @ x.T
            dist.all_reduce(y)
            prof.step()
    return path
