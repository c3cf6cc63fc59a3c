"""pkroof's copy-engine overlaps (kernels/fused.py) with N ranks emulated on one GPU: real cuBLAS GEMMs, DMAs, flag
kernels and side streams, as tests/emulate_ce.py runs the copy-engine collectives.

all-gather + GEMM, GEMM + reduce-scatter (copy engine, and the epilogue storing straight into the peers' inboxes)
and the one-shot GEMM + all-reduce (bf16 and fp32), at 2, 3, 4 and 8 ranks: three eager calls in a row with fresh
inputs, then (2-4 ranks) each rank's call captured in a CUDA graph and the graphs replayed together on fresh
inputs. The GEMM + all-reduce above its one-shot size is GEMM + reduce-scatter then pkroof's SM all-gather, whose
flags need real peers (tests/emulate.py checks that kernel's indexing): not emulated here. Expected values: fp32
torch on every rank's inputs.

    python tests/emulate_fused.py       # every case; exits 1 on the first mismatch (needs one GPU)
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import emulate_ce  # first: it sets CUDA's environment and switches NVLink multicast off before torch starts

Ranks = emulate_ce.Ranks

import torch  # noqa: E402

from pkroof.kernels import fused  # noqa: E402

K, N = 64, 48  # inner and output columns per rank; rows per case below


class FusedRanks(Ranks):
    modules = (fused,)
    events = tuple(range(6))  # AGG_READY ... GAR_FREE

    def __init__(self, world: int) -> None:
        super().__init__(world, reserve=64 << 20)  # cuBLAS's workspace per stream comes out of this too

    def warm(self) -> None:
        """The flag kernels, and a GEMM on every rank's calling stream: cuBLAS makes its workspace for a stream at
        the first GEMM there, an allocation that must not happen while another rank spins."""
        super().warm()
        x = torch.ones(64, 64, dtype=torch.bfloat16, device="cuda")
        for main in self.main:
            with torch.cuda.stream(main):
                torch.matmul(x, x)
        torch.cuda.synchronize()


def _randn(g: torch.Generator, dtype: torch.dtype, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=g, device="cuda") * scale).to(dtype)


def _rows(args: list[tuple], rank: int) -> torch.Tensor:
    world = len(args)
    total = sum(a.float() @ b.float() for a, b in args)
    rows = total.shape[0] // world
    return total[rank * rows : (rank + 1) * rows]


def _sum(args: list[tuple], rank: int) -> torch.Tensor:
    return sum(a.float() @ b.float() for a, b in args)


# name: (function, rows of A per rank at world P, expected output of rank r from every rank's (A, B), dtype)
CASES = {
    "all-gather-gemm": (
        fused.all_gather_gemm_ce,
        lambda world: 40,  # this rank's sequence shard
        lambda args, r: torch.cat([a for a, _ in args]).float() @ args[r][1].float(),
        torch.bfloat16,
    ),
    "gemm-reduce-scatter-ce": (fused.gemm_reduce_scatter_ce, lambda world: 16 * world, _rows, torch.bfloat16),
    "gemm-reduce-scatter-epilogue": (
        fused.gemm_reduce_scatter_epilogue,
        lambda world: 16 * world,
        _rows,
        torch.bfloat16,
    ),
    # 37 rows: row blocks of 4-5 rows at 8 ranks. fp32 too: beyond 2 ranks the sum once started from an fp32 partial
    # without copying it (Tensor.float() of fp32 is the same tensor), so it summed into, and returned, an inbox slot
    # that the next call overwrote (found by tests/test_fused_cpu.py, 2026-12-01)
    "gemm-all-reduce-one-shot": (fused.gemm_all_reduce_ce, lambda world: 37, _sum, torch.bfloat16),
    "gemm-all-reduce-one-shot-fp32": (fused.gemm_all_reduce_ce, lambda world: 37, _sum, torch.float32),
}


def _draw(g: torch.Generator, name: str, world: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    _, rows, _, dtype = CASES[name]
    return [(_randn(g, dtype, rows(world), K), _randn(g, dtype, K, N, scale=K**-0.5)) for _ in range(world)]


def _wrong(name: str, args: list[tuple], outs: list[torch.Tensor]) -> str | None:
    world = len(args)
    for rank, out in enumerate(outs):
        want = CASES[name][2](args, rank)
        # bf16 GEMM outputs (entries O(1)), then up to P − 1 bf16 roundings of partial sums of O(√P): a few 2^-8
        # ulps. A row from the wrong rank or a missing partial is off by O(1).
        bad = ~torch.isclose(out.float(), want, rtol=1.6e-2, atol=0.03 * world)
        if bad.any():
            return f"rank {rank}: {int(bad.sum())} of {bad.numel()} wrong"
    return None


def check(name: str, world: int, calls: int = 3) -> str | None:
    fn = CASES[name][0]
    ranks = FusedRanks(world)
    ranks.warm()
    g = torch.Generator(device="cuda").manual_seed(world)
    issued = []
    for _ in range(calls):
        args = _draw(g, name, world)
        issued.append((args, ranks.call(fn, args)))
    torch.cuda.synchronize()
    for call, (args, outs) in enumerate(issued):
        why = _wrong(name, args, outs)
        if why is not None:
            return f"call {call}, {why}"
    return None


def check_graph(name: str, world: int, replays: int = 3) -> str | None:
    """One eager call (it makes the inboxes), then each rank's call captured in a CUDA graph on its calling stream,
    and all the graphs replayed together on fresh inputs."""
    fn = CASES[name][0]
    ranks = FusedRanks(world)
    ranks.warm()
    g = torch.Generator(device="cuda").manual_seed(100 + world)
    args = _draw(g, name, world)
    why = _wrong(name, args, ranks.call(fn, args))
    torch.cuda.synchronize()
    if why is not None:
        return f"eager call, {why}"
    graphs, outs = ranks.capture(fn, args)
    for replay in range(replays):
        fresh = _draw(g, name, world)
        for held, new in zip(args, fresh, strict=True):
            for tensor, value in zip(held, new, strict=True):
                tensor.copy_(value)
        torch.cuda.synchronize()
        ranks.replay(graphs)
        torch.cuda.synchronize()
        why = _wrong(name, fresh, outs)
        if why is not None:
            return f"replay {replay}, {why}"
    return None


def cases():
    for name in CASES:
        for world in (2, 3, 4, 8):
            yield check, name, world
            if world < 8:
                yield check_graph, name, world


def run_all() -> int:
    failures = 0
    for fn, name, world in cases():
        why = fn(name, world)
        label = f"{'graph' if fn is check_graph else 'eager'} {name} world={world}"
        print(f"{'ok  ' if why is None else 'FAIL'} {label}{'' if why is None else ': ' + why}", flush=True)
        failures += why is not None
    return failures


if __name__ == "__main__":
    print(f"# {torch.cuda.get_device_name()}, CUDA_DEVICE_MAX_CONNECTIONS={os.environ['CUDA_DEVICE_MAX_CONNECTIONS']}")
    sys.exit(1 if run_all() else 0)
