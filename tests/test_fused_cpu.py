"""The copy-engine overlaps of kernels/fused.py on CPU, 1-4 ranks as threads (tests/thread_ranks.py): which rows go
to which peer's inbox, in which order, and the READY/FREE hand-offs over three calls in a row with fresh inputs.
Until now they had only run on 2 GPUs (the profiler). Expected values: plain torch on every rank's inputs.

The GEMM + all-reduce above its one-shot size runs GEMM + reduce-scatter (checked here) then pkroof's SM all-gather
(kernels/symm_collectives.py, checked on emulated ranks in tests/emulate.py): that path is left to the GPU tests.
"""

import pytest

pytest.importorskip("triton")  # kernels/symm.py, which fused imports, is Triton
torch = pytest.importorskip("torch")

from thread_ranks import run_ranks  # noqa: E402 (after the skips)

from pkroof.kernels import fused  # noqa: E402

CALLS = 3


def _draw(g, *shape):
    return torch.randn(*shape, generator=g, dtype=torch.float64).float()


def _calls(world, shapes, seed):
    """CALLS calls' arguments per rank: one tensor of each shape, drawn afresh for every call and rank."""
    g = torch.Generator().manual_seed(seed)
    return [[tuple(_draw(g, *s) for s in shapes) for _ in range(world)] for _ in range(CALLS)]


def _check(outs, calls, expected):
    for i, (out_of, args) in enumerate(zip(outs, calls, strict=True)):
        for rank, out in enumerate(out_of):
            torch.testing.assert_close(out, expected(args, rank), rtol=1e-5, atol=1e-5, msg=f"call {i}, rank {rank}")


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_all_gather_gemm_multiplies_every_ranks_shard_into_its_rows(monkeypatch, world):
    # C [P·m_local, n] on rank r = cat(A_shard of ranks 0..P−1) · B_r; 37 rows a rank, K 24, N 40
    calls = _calls(world, [(37, 24), (24, 40)], seed=world)
    outs = run_ranks(monkeypatch, fused, fused.all_gather_gemm_ce, calls)
    _check(outs, calls, lambda args, r: torch.cat([a for a, _ in args]) @ args[r][1])


@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_gemm_reduce_scatter_sums_each_ranks_rows(monkeypatch, world, epilogue):
    # rank r's rows [r·m/P, (r+1)·m/P) of sum_p A_p · B_p; A_p [m, K_local], B_p [K_local, N]; 12 rows a rank
    m = 12 * world
    calls = _calls(world, [(m, 24), (24, 40)], seed=10 + world)
    fn = fused.gemm_reduce_scatter_epilogue if epilogue else fused.gemm_reduce_scatter_ce
    outs = run_ranks(monkeypatch, fused, fn, calls)

    def expected(args, r):
        total = sum(a @ b for a, b in args)
        return total[r * 12 : (r + 1) * 12]

    _check(outs, calls, expected)


def test_gemm_reduce_scatter_refuses_rows_that_do_not_split(monkeypatch):
    calls = _calls(3, [(13, 8), (8, 8)], seed=0)
    with pytest.raises(AssertionError, match="do not split over 3 ranks"):
        run_ranks(monkeypatch, fused, fused.gemm_reduce_scatter_ce, calls)


@pytest.mark.parametrize("rows", [1, 2, 7, 37])  # fewer rows than ranks: empty row blocks are skipped
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_gemm_all_reduce_one_shot_gives_every_rank_the_whole_sum(monkeypatch, world, rows):
    # C [m, N] = sum_p A_p · B_p on every rank, one-shot: each row block of the partial product pushed to every
    # peer, then summed (at 2 ranks in the dtype, beyond in fp32 in rank order: the same bits on every rank)
    assert fused.one_shot(rows * 40 * 4, world)  # fp32 [rows, 40]: far below the one-shot sizes
    calls = _calls(world, [(rows, 24), (24, 40)], seed=20 + world + rows)
    outs = run_ranks(monkeypatch, fused, fused.gemm_all_reduce_ce, calls)
    _check(outs, calls, lambda args, r: sum(a @ b for a, b in args))
    for out_of in outs:  # every rank holds the same bits
        assert all(torch.equal(out_of[0], out) for out in out_of[1:])


@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_the_model_pipelines_the_one_shot_all_reduce_as_the_kernel_does(world):
    # rooflines/predictions.py charges the one-shot GEMM + all-reduce's copy-engine overlap a DMA per row block and
    # peer, and fills its pipeline by those blocks: its count must be the kernel's
    from conftest import make_system

    from pkroof.rooflines.collectives import Algorithm, Collective
    from pkroof.rooflines.predictions import _ce_overlap_pipeline
    from pkroof.rooflines.workload import CommOp

    op = CommOp("all-reduce", Collective.ALL_REDUCE, 1 << 20, world)
    blocks = fused.one_shot_blocks(world)
    assert _ce_overlap_pipeline(op, Algorithm.ONE_SHOT, make_system(n=world)) == (blocks, blocks)
