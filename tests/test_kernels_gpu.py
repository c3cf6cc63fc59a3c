"""pkroof's collective kernel with 2, 3, 4 and 8 ranks emulated on one GPU.

Each emulated rank has its own input, output, staging buffer and counters, and the same pointer tables a
real rendezvous gives. The kernel runs without its flags in two phases (every rank stages, then every rank
consumes), so these tests check the indexing and the double-buffered staging for any world size; the flag
protocol itself is checked on real GPUs by the profiler (benchmarks/device_run_kernels.sh). Expected values
come from plain torch on the stacked inputs, summed in fp32 and rounded once, as the kernel does.
"""

import pytest

pytestmark = pytest.mark.gpu

KINDS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]


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


def _emulate(kind_name, world, n, push, ctas, calls=3, seed=0):
    import torch

    from pkroof.kernels import collectives as c
    from pkroof.kernels.symm import FLAG_STRIDE, MAX_CTAS

    kind = {
        "all-reduce": c.ALL_REDUCE,
        "all-gather": c.ALL_GATHER,
        "reduce-scatter": c.REDUCE_SCATTER,
        "all-to-all": c.ALL_TO_ALL,
    }[kind_name]
    layout = c.Layout.of(kind, n, world, push)
    stages = [
        torch.full((2 * layout.half_size,), float("nan"), dtype=torch.bfloat16, device="cuda") for _ in range(world)
    ]
    flags = [torch.zeros(MAX_CTAS * world * FLAG_STRIDE, dtype=torch.int32, device="cuda") for _ in range(world)]
    table = torch.tensor([s.data_ptr() for s in stages], dtype=torch.int64, device="cuda")
    flag_table = torch.tensor([f.data_ptr() for f in flags], dtype=torch.int64, device="cuda")
    epochs = [torch.zeros(MAX_CTAS, dtype=torch.int32, device="cuda") for _ in range(world)]
    counters = [torch.zeros(MAX_CTAS, dtype=torch.int32, device="cuda") for _ in range(world)]
    g = torch.Generator(device="cpu").manual_seed(seed)
    for call in range(calls):  # several calls: parity halves and flag values carry over between them
        xs = [torch.randn(n, generator=g).to(torch.bfloat16).cuda() for _ in range(world)]
        outs = [
            torch.full((layout.out_numel,), float("nan"), dtype=torch.bfloat16, device="cuda") for _ in range(world)
        ]
        for phase in (1, 2):  # every rank stages, then every rank consumes
            for r in range(world):
                c.launch(
                    layout,
                    xs[r],
                    outs[r],
                    table,
                    flag_table,
                    flags[r],
                    epochs[r],
                    counters[r],
                    r,
                    ctas=ctas,
                    phase=phase,
                )
        for r in range(world):
            want = _expected(kind_name, xs, r)
            bad = ~torch.isclose(outs[r].float(), want.float(), rtol=1.6e-2, atol=1e-2)
            where = bad.nonzero().flatten()[:8].tolist()
            assert not bad.any(), (
                f"call {call}, rank {r} of {world}: {int(bad.sum())} of {bad.numel()} wrong, first at {where}: "
                f"got {outs[r][where].tolist()}, want {want[where].tolist()}"
            )


@pytest.mark.parametrize("push", [False, True], ids=["pull", "push"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_emulated_ranks_odd_sizes(kind, world, push):
    # all-reduce: 20483 elements, neither a multiple of the 4096-element block nor of the world size; the
    # others: chunks of 10001 elements. Over 4 CTAs both give 1-2 tiles per CTA (the pipelined path).
    _emulate(kind, world, 5 * 4096 + 3 if kind == "all-reduce" else world * 10_001, push, ctas=4)


@pytest.mark.parametrize("push", [False, True], ids=["pull", "push"])
@pytest.mark.parametrize("kind", KINDS)
def test_emulated_ranks_many_tiles_per_cta(kind, push):
    # 8 MiB per rank over 8 CTAs: each CTA pipelines dozens of tiles
    _emulate(kind, 4, 4 * (1 << 20), push, ctas=8)
