"""The copy-engine collectives' logic on CPU: ranks are threads sharing one process's memory (tests/thread_ranks.py),
the copies chunk by chunk. Expected values: plain torch on the stacked inputs.
"""

import itertools

import pytest

pytest.importorskip("triton")  # kernels/symm.py, which copy_engine imports, is Triton
torch = pytest.importorskip("torch")

from emulate import _expected  # noqa: E402 (after the skips)
from thread_ranks import run_ranks  # noqa: E402

from pkroof.kernels import copy_engine  # noqa: E402


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 300])  # one chunk; six (test_chunk_bounds_... below)
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
@pytest.mark.parametrize(
    ("kind", "fn"),
    [
        ("all-gather", copy_engine.all_gather_ce),
        ("all-to-all", copy_engine.all_to_all_ce),
        ("reduce-scatter", copy_engine.reduce_scatter_ce),
        ("all-reduce", copy_engine.all_reduce_ce),
    ],
)
@pytest.mark.parametrize("local_copy", ["dma", "sm"])
@pytest.mark.parametrize("schedule", ["equal", "halving"])
def test_copy_engine_collectives_put_every_byte_in_its_place(
    monkeypatch, kind, fn, world, chunk_bytes, local_copy, schedule
):
    monkeypatch.setenv("PKROOF_CE_CHUNK", str(chunk_bytes))  # launch settings: read when each call runs
    monkeypatch.setenv("PKROOF_CE_SCHEDULE", schedule)
    monkeypatch.setattr(copy_engine, "TAIL_BYTES", chunk_bytes // 2)  # halving: 64-element chunks at 300 B
    monkeypatch.setenv("PKROOF_CE_LOCAL_COPY", local_copy)
    n = world * 1001 if kind in ("all-to-all", "reduce-scatter") else 1001  # odd chunks
    g = torch.Generator().manual_seed(world)
    calls = [[torch.randn(n, generator=g).to(torch.bfloat16) for _ in range(world)] for _ in range(3)]
    outs = run_ranks(monkeypatch, copy_engine, fn, [[(x,) for x in xs] for xs in calls])
    for xs, out_of in zip(calls, outs, strict=True):
        for rank, out in enumerate(out_of):
            want = _expected(kind, xs, rank)
            # bf16 adds round after each peer where the expectation rounds once: up to half an ulp a peer (2 ulps,
            # 0.0625, seen at 8 ranks, sums near 4-8). A misplaced or missing chunk is off by O(1)
            atol = 0.025 * max(1, world - 1) if kind in ("all-reduce", "reduce-scatter") else 2e-2
            torch.testing.assert_close(out.reshape(-1), want, rtol=1.6e-2, atol=atol, msg=f"rank {rank} of {world}")


def test_equal_chunk_bounds_cover_the_span_in_64_element_steps(monkeypatch):
    monkeypatch.setenv("PKROOF_CE_SCHEDULE", "equal")
    monkeypatch.setenv("PKROOF_CE_CHUNK", str(8 << 20))
    # 64 MiB of bf16 = 32 Mi elements: 8 chunks of 4 Mi elements (8 MiB each)
    bounds = copy_engine.chunk_bounds(32 << 20, 2)
    assert bounds == [(i * (4 << 20), (i + 1) * (4 << 20)) for i in range(8)]
    # 1 GiB would be 128 chunks of 8 MiB: capped at MAX_CHUNKS = 16 chunks of 32 Mi elements
    assert len(copy_engine.chunk_bounds(512 << 20, 2)) == 16
    # 1001 elements of 300-byte chunks: ceil(2002 / 300) = 7 chunks of ceil(1001 / 7) = 143 -> 192 elements
    # (the next multiple of 64), so ceil(1001 / 192) = 6 ranges, the last 1001 - 5 * 192 = 41 long
    monkeypatch.setenv("PKROOF_CE_CHUNK", "300")
    bounds = copy_engine.chunk_bounds(1001, 2)
    assert [hi - lo for lo, hi in bounds] == [192] * 5 + [41]
    assert bounds[0][0] == 0 and all(a[1] == b[0] for a, b in itertools.pairwise(bounds))


def test_halving_chunks_end_small_and_start_with_what_is_left(monkeypatch):
    monkeypatch.setenv("PKROOF_CE_SCHEDULE", "halving")
    mib = 1 << 19  # bf16 elements in one MiB
    # 128 MiB per peer: from the end 4, 8, 16, 32, 64 MiB (124), then the 4 MiB left goes first
    lengths = [hi - lo for lo, hi in copy_engine.chunk_bounds(128 * mib, 2)]
    assert lengths == [4 * mib, 64 * mib, 32 * mib, 16 * mib, 8 * mib, 4 * mib]
    # 1 GiB per peer: 4..64 (124 MiB) then 64 MiB chunks: 14 of them (896, 1020 in all), 4 MiB left first
    lengths = [hi - lo for lo, hi in copy_engine.chunk_bounds(1024 * mib, 2)]
    assert lengths == [4 * mib] + [64 * mib] * 15 + [32 * mib, 16 * mib, 8 * mib, 4 * mib]
    # below the tail size: one chunk; ranges always tile the span
    assert copy_engine.chunk_bounds(1001, 2) == [(0, 1001)]
    bounds = copy_engine.chunk_bounds(100 * mib + 7, 2)
    assert bounds[0][0] == 0 and bounds[-1][1] == 100 * mib + 7
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))


@pytest.mark.parametrize("mib", [0.5, 4, 5, 12, 13, 32, 64, 124, 125, 256, 512, 1024])
def test_the_model_counts_the_chunks_the_kernel_cuts(monkeypatch, mib):
    # rooflines/costs.py charges one copy-engine α per chunk after the first: its count must be the kernel's
    from importlib import import_module

    monkeypatch.setenv("PKROOF_CE_SCHEDULE", "halving")
    span = int(mib * (1 << 19))  # bf16 elements
    model = import_module("pkroof.rooflines.costs")
    assert model._ce_chunks(span * 2) == len(copy_engine.chunk_bounds(span, 2))


@pytest.mark.parametrize("streams", [1, 2])
def test_each_peer_has_its_lane_of_copy_streams(streams):
    # a lane per peer: chunk c's DMA to the i-th of 3 peers on stream (c mod streams)·3 + i, so every (chunk parity,
    # peer) has a stream of its own and a peer's chunks alternate over its lane's; one lane: the peers share the
    # chunk's stream, as before lanes existed. `streams` per lane: PKROOF_CE_STREAMS, which Streams reads per call
    index = copy_engine.copy_stream_index
    per_lane = {(c % streams, i): index(c, i, 3, streams) for c in range(4) for i in range(3)}
    assert sorted(per_lane.values()) == list(range(3 * streams))
    assert all(index(c, i, 3, streams) == (c % streams) * 3 + i for c in range(4) for i in range(3))
    assert {index(c, i, 1, streams) for i in range(3) for c in (0,)} == {0}
    assert index(1, 2, 1, streams) == 1 % streams
