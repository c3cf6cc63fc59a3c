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
