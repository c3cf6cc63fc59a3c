"""pkroof's collective kernel with 1, 2, 3, 4 and 8 ranks emulated on one GPU (tests/emulate.py says how)."""

import pytest
from emulate import KINDS, WORLDS, emulate, emulate_gemm_all_reduce, sizes, tma_sizes

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("push", [False, True], ids=["pull", "push"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("world", WORLDS)
def test_emulated_ranks_odd_sizes(kind, world, push):
    emulate(kind, world, sizes(kind, world), push, ctas=4, device="cuda")


@pytest.mark.parametrize("push", [False, True], ids=["pull", "push"])
@pytest.mark.parametrize("kind", KINDS)
def test_emulated_ranks_many_tiles_per_cta(kind, push):
    # 8 MiB per rank over 8 CTAs: each CTA pipelines dozens of tiles
    emulate(kind, 4, 4 * (1 << 20), push, ctas=8, device="cuda")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("world", WORLDS)
def test_emulated_ranks_tma_push(kind, world):
    emulate(kind, world, tma_sizes(kind, world), True, ctas=4, device="cuda", tma=True)


@pytest.mark.parametrize("push", [False, True], ids=["pull", "push"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("world", WORLDS)
def test_emulated_ranks_split_roles(kind, world, push):
    emulate(kind, world, sizes(kind, world), push, ctas=4, device="cuda", split=True)
    emulate(kind, 4, 4 * (1 << 20), push, ctas=16, device="cuda", split=True)  # 8 stagers, dozens of tiles each


@pytest.mark.parametrize("world", WORLDS)
def test_emulated_ranks_gemm_all_reduce_inter_sm(world):
    emulate_gemm_all_reduce(world, device="cuda")  # the CPU test's tiny tiles and awkward shape (tests/emulate.py)
    # the shipped tile (128 x 256 x 64): 520 rows = 4 bands and 8 rows; 776 columns = 3 tiles and 8 columns; k = 200
    # = 3 K steps and 8; 4 pieces of 32 rows; 10 GEMM CTAs, 3 communication CTAs over 20 units
    emulate_gemm_all_reduce(world, device="cuda", m=520, n=776, k=200, tile=(128, 256, 64, 3, 8), gemm_ctas=10,
                            comm_ctas=3, pieces=4)  # fmt: skip
    # tiles in groups of 3 bands (PKROOF_INTER_SM_GROUP): bands 0-2 column by column, then 3-4 (a partial group, the
    # last band partial too); and the tiny case in groups of 2
    emulate_gemm_all_reduce(world, device="cuda", m=520, n=776, k=200, tile=(128, 256, 64, 3, 8), gemm_ctas=10,
                            comm_ctas=3, pieces=4, group=3)  # fmt: skip
    emulate_gemm_all_reduce(world, device="cuda", group=2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("world", WORLDS)
def test_ll_collectives_phased(world, dtype):
    from emulate_ll import CASES, KINDS, emulate_phased, emulate_two_shot

    for n, ctas in CASES:  # the CPU test's cases (tests/emulate_ll.py)
        for kind in KINDS:
            emulate_phased(kind, world, n, dtype, ctas, device="cuda")
        emulate_two_shot(world, n, dtype, ctas, device="cuda")


@pytest.mark.parametrize(
    "world,n,ctas",
    [
        (2, 128 << 10, 128),  # 256 KiB of bf16 on the shipped 128 CTAs: 256 CTAs resident at once
        (2, 5 * 4096 + 3, 2),  # odd size, two tiles on CTA 0
        (4, 8192, 16),  # decode all-reduce size (16 KiB)
        (8, 5 * 4096 + 3, 8),
    ],
)
@pytest.mark.parametrize("kind", ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"])
def test_ll_collectives_concurrent(kind, world, n, ctas):
    # the protocol itself: ranks' kernels side by side on streams of one GPU, 40 calls queued per rank, then the
    # same captured in CUDA graphs and replayed twice (tests/emulate_ll.py); n elements per rank and peer
    from emulate_ll import emulate_concurrent

    emulate_concurrent(kind, world, n, "bfloat16", ctas, graph=True)
    emulate_concurrent(kind, world, n, "float32", ctas)


def test_ll_all_reduce_host_path_on_a_one_rank_group():
    # workspace, zeroed inbox, padding of odd and misaligned inputs, graph capture, the GEMV + all-reduce, the CTAs it
    # reports, and the one-line refusals, on a real (1-rank) NCCL group in a process of its own (tests/emulate_ll.py)
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    done = subprocess.run([sys.executable, str(here / "emulate_ll.py"), "--one-rank"], capture_output=True, text=True,
                          timeout=180, cwd=here.parent)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "one-rank group ok" in done.stdout
