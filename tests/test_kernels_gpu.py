"""pkroof's collective kernel with 2, 3, 4 and 8 ranks emulated on one GPU (tests/emulate.py says how)."""

import pytest
from emulate import KINDS, WORLDS, emulate, sizes, tma_sizes

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
