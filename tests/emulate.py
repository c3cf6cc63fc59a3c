"""pkroof's collective kernel with N ranks emulated in one process, on a GPU or in Triton's interpreter on CPU.

Each emulated rank has its own input, output, staging buffer and counters, and the same pointer tables a real
rendezvous gives. The kernel runs without its flags in two phases (every rank stages, then every rank
consumes), which checks the indexing and the double-buffered staging for any world size; the flag protocol
itself is checked on real GPUs by the profiler. Expected values come from plain torch on the stacked inputs,
summed in fp32 and rounded once, as the kernel does.

    python tests/emulate.py          # every case, on CPU through the interpreter; exits 1 on the first mismatch

The interpreter must be chosen before triton compiles anything (TRITON_INTERPRET=1 at import), so the CPU
run is its own process.
"""

from __future__ import annotations

import os
import sys

KINDS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]
WORLDS = [1, 2, 3, 4, 8]


def sizes(kind: str, world: int) -> int:
    """all-reduce: 20483 elements, neither a multiple of the 4096-element block nor of the world size; the
    others: chunks of 10001 elements. Over 4 CTAs both give 1-2 tiles per CTA (the pipelined path)."""
    return 5 * 4096 + 3 if kind == "all-reduce" else world * 10_001


def _expected(kind, xs, rank):
    import torch

    world = len(xs)
    stacked = torch.stack(xs)
    if kind == "all-reduce":
        return stacked.float().sum(0).to(xs[0].dtype)
    if kind == "all-gather":
        return stacked.reshape(-1)
    chunks = stacked.view(world, world, -1)  # [source, destination chunk, element]
    if kind == "reduce-scatter":
        return chunks[:, rank].float().sum(0).to(xs[0].dtype)
    return chunks[:, rank].reshape(-1)  # all-to-all: chunk `rank` of every source, in source order


def tma_sizes(kind: str, world: int) -> int:
    """TMA moves whole 256-element rows of 16-byte aligned chunks: all-reduce 20488 elements (80 rows and a tail
    of 8), the others chunks of 10008 (39 rows and a tail of 24), so both the bulk copies and the tail run."""
    return 80 * 256 + 8 if kind == "all-reduce" else world * (39 * 256 + 24)


def emulate(
    kind_name: str,
    world: int,
    n: int,
    push: bool,
    ctas: int,
    device: str,
    calls: int = 3,
    tma: bool = False,
    split: bool = False,
) -> None:
    """Three consecutive calls (both parity halves), fresh inputs each; AssertionError on a wrong element."""
    import torch

    from pkroof.kernels import symm_collectives as c
    from pkroof.kernels.symm import FLAG_STRIDE, MAX_CTAS

    kind = dict(zip(KINDS, [c.ALL_REDUCE, c.ALL_GATHER, c.REDUCE_SCATTER, c.ALL_TO_ALL], strict=True))[kind_name]
    layout = c.Layout.of(kind, n, world, push)

    def nans(numel: int) -> torch.Tensor:  # unwritten elements stay NaN and fail the comparison
        return torch.full((numel,), float("nan"), dtype=torch.bfloat16, device=device)

    def zeros(numel: int) -> torch.Tensor:
        return torch.zeros(numel, dtype=torch.int32, device=device)

    stages = [nans(2 * layout.half_size) for _ in range(world)]
    flags = [zeros(MAX_CTAS * world * FLAG_STRIDE) for _ in range(world)]
    table = torch.tensor([s.data_ptr() for s in stages], dtype=torch.int64, device=device)
    flag_table = torch.tensor([f.data_ptr() for f in flags], dtype=torch.int64, device=device)
    epochs = [zeros(2 * MAX_CTAS) for _ in range(world)]  # split roles keep two counters per flag slot
    counters = [zeros(2 * MAX_CTAS) for _ in range(world)]
    g = torch.Generator(device="cpu").manual_seed(world * 100 + n)
    for call in range(calls):
        xs = [torch.randn(n, generator=g).to(torch.bfloat16).to(device) for _ in range(world)]
        outs = [nans(layout.out_numel) for _ in range(world)]
        for phase in (1, 2):  # every rank stages, then every rank consumes
            for r in range(world):
                c.launch(layout, xs[r], outs[r], table, flag_table, flags[r], epochs[r], counters[r], r, ctas=ctas,
                         phase=phase, tma=tma, split=split)  # fmt: skip
        for r in range(world):
            want = _expected(kind_name, xs, r)
            bad = ~torch.isclose(outs[r].float(), want.float(), rtol=1.6e-2, atol=1e-2)
            where = bad.nonzero().flatten()[:8].tolist()
            mode = ("tma" if tma else "push" if push else "pull") + (" split" if split else "")
            assert not bad.any(), (
                f"{kind_name} {mode}, call {call}, rank {r} of {world}: {int(bad.sum())} of {bad.numel()} wrong, "
                f"first at {where}: got {outs[r][where].tolist()}, want {want[where].tolist()}"
            )


GEMM_AR_CASE = dict(m=40, n=88, k=40, tile=(16, 32, 16, 1, 4), gemm_ctas=4, comm_ctas=2, pieces=3, group=1)
# 40 rows: two whole bands of 16 and a partial one; k = 40: the last K step reads past the end (TMA zero-fills);
# n = 88: 16-byte rows (TMA), not a multiple of the 32-column tile; 3 pieces of ceil(16 / 3) = 6 rows per band
# (6, 6, 4; the partial band 6, 2, empty); 9 units over 2 communication CTAs, 9 tiles over 4 GEMM CTAs; tiles in
# row-major order (group 1; group 2: bands 0-1 column by column, then band 2 alone, a partial group).


def emulate_gemm_all_reduce(world: int, device: str, calls: int = 3, **case: object) -> None:
    """GEMM + all-reduce inter-SM (kernels/inter_sm.py) with emulated ranks: every rank's GEMM, then every rank's
    push (phase 1), then every rank's sum (phase 2); three calls (both parity halves), fresh inputs each."""
    import torch

    from pkroof.kernels import inter_sm
    from pkroof.kernels.symm import FLAG_STRIDE, MAX_CTAS

    c = {**GEMM_AR_CASE, **case}
    m, n, k, tile = c["m"], c["n"], c["k"], c["tile"]
    units = inter_sm.plan(m, c["pieces"], tile[0])[1]

    def full(numel: int, value: float, dtype: torch.dtype) -> torch.Tensor:
        return torch.full((numel,), value, dtype=dtype, device=device)

    stagings = [full(m * n, float("nan"), torch.bfloat16) for _ in range(world)]
    inboxes = [full(2 * world * inter_sm.slot(m, n), float("nan"), torch.bfloat16) for _ in range(world)]
    flags = [full(MAX_CTAS * world * FLAG_STRIDE, 0, torch.int32) for _ in range(world)]
    inbox_table = torch.tensor([x.data_ptr() for x in inboxes], dtype=torch.int64, device=device)
    flag_table = torch.tensor([f.data_ptr() for f in flags], dtype=torch.int64, device=device)
    counters = [
        [full(size, 0, torch.int32) for size in (MAX_CTAS, MAX_CTAS, units, -(-m // tile[0]))] for _ in range(world)
    ]  # fmt: skip  epochs, calls, unit_seen, band_ready per rank
    g = torch.Generator(device="cpu").manual_seed(world * 1000 + m)
    for call in range(calls):
        a = [torch.randn(m, k, generator=g).to(torch.bfloat16).to(device) for _ in range(world)]
        b = [(torch.randn(k, n, generator=g) * k**-0.5).to(torch.bfloat16).to(device) for _ in range(world)]
        outs = [full(m * n, float("nan"), torch.bfloat16) for _ in range(world)]
        for r in range(world):
            inter_sm.gemm(a[r], b[r], stagings[r].view(m, n), counters[r][3], c["gemm_ctas"], tile, c["group"])
        for phase in (1, 2):
            for r in range(world):
                epochs, calls_, seen, ready = counters[r]
                inter_sm.reduce(stagings[r], outs[r], inbox_table, flag_table, flags[r], epochs, calls_, seen, ready,
                                r, world, m, n, comm_ctas=c["comm_ctas"], phase=phase,
                                pieces=c["pieces"], bm=tile[0], bn=tile[1])  # fmt: skip
        # each rank's product rounded to bf16 (the staging copy), summed in fp32, rounded once. The kernel's fp32
        # sums run in another order than torch's, so a product can round to the neighbouring bf16 value: up to
        # one bf16 step (2^-7 of its magnitude at most) per rank, beside the final rounding (rtol)
        partials = [(x.float() @ y.float()).to(torch.bfloat16).float() for x, y in zip(a, b, strict=True)]
        want = sum(partials).to(torch.bfloat16).view(-1)
        atol = world * 2**-7 * max(float(p.abs().max()) for p in partials)
        for r in range(world):
            bad = ~torch.isclose(outs[r].float(), want.float(), rtol=1.6e-2, atol=atol)
            where = bad.nonzero().flatten()[:8].tolist()
            assert not bad.any(), (
                f"gemm-all-reduce inter-SM, call {call}, rank {r} of {world}: {int(bad.sum())} of {bad.numel()} "
                f"wrong, first at {where}: got {outs[r][where].tolist()}, want {want[where].tolist()}"
            )


def _interpreter_ints() -> None:
    """Triton 3.6's interpreter turns its 1-element scalar arrays into Python ints with int(array), which NumPy 2
    refuses; give its module an int that accepts them (and is still `int` to isinstance)."""
    import builtins

    import numpy as np
    import triton.runtime.interpreter as interpreter

    class _IntType(type):
        def __instancecheck__(cls, obj: object) -> bool:
            return isinstance(obj, builtins.int)

        def __subclasscheck__(cls, sub: type) -> bool:
            return issubclass(sub, builtins.int)

        def __call__(cls, x: object = 0, *args: object) -> int:
            if isinstance(x, np.ndarray) and x.size == 1:
                x = x.reshape(())
            return builtins.int(x, *args)

    class _Int(metaclass=_IntType):
        pass

    interpreter.int = _Int


def cases() -> list[tuple[str, str, dict]]:
    """Every CPU case: (its name, the function here that runs it, its keyword arguments)."""
    out = []
    for kind in KINDS:
        for world in WORLDS:
            n, tma_n = sizes(kind, world), tma_sizes(kind, world)
            for push in (False, True):
                way = "push" if push else "pull"
                out.append((f"{kind}-{world}-{way}", "emulate", dict(kind=kind, world=world, n=n, push=push)))
            out.append(
                (f"{kind}-{world}-tma-push", "emulate", dict(kind=kind, world=world, n=tma_n, push=True, tma=True))
            )
            out.append(
                (f"{kind}-{world}-split-push", "emulate", dict(kind=kind, world=world, n=n, push=True, split=True))
            )
    for world in WORLDS:
        out.append((f"gemm-all-reduce-inter-sm-{world}", "emulate_gemm_all_reduce", dict(world=world)))
    out.append(("gemm-all-reduce-inter-sm-3-grouped", "emulate_gemm_all_reduce", dict(world=3, group=2)))
    return out


def run_case(function: str, kwargs: dict) -> None:
    """One case of cases() on CPU (the interpreter chosen already: interpreter_setup())."""
    if function == "emulate":
        kw = dict(kwargs)
        emulate(kw.pop("kind"), kw.pop("world"), kw.pop("n"), kw.pop("push"), ctas=4, device="cpu", **kw)
    else:
        emulate_gemm_all_reduce(device="cpu", **kwargs)


def interpreter_setup() -> None:
    """Triton's interpreter, before triton compiles anything, and what the kernels need of it on CPU."""
    os.environ["TRITON_INTERPRET"] = "1"
    _interpreter_ints()
    import torch
    import triton

    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8))  # TMA descriptors


def main() -> int:
    interpreter_setup()
    for _, function, kwargs in cases():
        run_case(function, kwargs)
    print(f"{len(cases())} cases correct")
    return 0


if __name__ == "__main__":
    sys.exit(main())
