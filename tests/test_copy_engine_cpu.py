"""The copy-engine collectives' logic on CPU: ranks are threads sharing one process's memory.

A stand-in workspace gives each thread-rank its own named buffers (NaN-filled, so a slot nobody wrote fails the
comparison), lets every rank address every other's (as symmetric memory does), and makes barrier() a thread
barrier. On a GPU the copies are DMAs and the barrier a kernel, both in stream order; on CPU everything is
synchronous, so the same code checks which bytes go where. Expected values: plain torch on the stacked inputs.
"""

import threading

import pytest

pytest.importorskip("triton")  # kernels/symm.py, which copy_engine imports, is Triton
torch = pytest.importorskip("torch")

from emulate import _expected  # noqa: E402 (after the skips)

from pkroof.kernels import copy_engine  # noqa: E402


class _Shared:
    def __init__(self, world: int):
        self.world = world
        self.buffers: list[dict] = [{} for _ in range(world)]
        self.lock = threading.Lock()
        self.gate = threading.Barrier(world, timeout=30)


class _Workspace:
    def __init__(self, shared: _Shared, rank: int):
        self.shared, self.rank, self.world = shared, rank, shared.world

    def _of(self, rank: int, name: str, numel: int, dtype):
        with self.shared.lock:
            return self.shared.buffers[rank].setdefault(
                (name, numel, dtype), torch.full((numel,), float("nan"), dtype=dtype)
            )

    def buffer(self, name, numel, dtype):
        return self._of(self.rank, name, numel, dtype), None

    def peer_view(self, name, numel, dtype, peer):
        return self._of(peer, name, numel, dtype)

    def barrier(self):
        self.shared.gate.wait()


def _run_ranks(monkeypatch, fn, inputs):
    world = len(inputs)
    shared, local = _Shared(world), threading.local()
    monkeypatch.setattr(copy_engine, "workspace", lambda: local.ws)
    outs, errors = [None] * world, []

    def rank_main(rank):
        local.ws = _Workspace(shared, rank)
        try:
            for _ in range(2):  # twice: the second call reuses the inboxes the first one freed
                outs[rank] = fn(inputs[rank])
        except Exception as e:  # reported below, with the rank
            errors.append((rank, e))
            shared.gate.abort()

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return outs


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize(
    ("kind", "fn"),
    [
        ("all-gather", copy_engine.all_gather_ce),
        ("all-to-all", copy_engine.all_to_all_ce),
        ("reduce-scatter", copy_engine.reduce_scatter_ce),
        ("all-reduce", copy_engine.all_reduce_ce),
    ],
)
def test_copy_engine_collectives_put_every_byte_in_its_place(monkeypatch, kind, fn, world):
    n = world * 1001 if kind in ("all-to-all", "reduce-scatter") else 1001  # odd chunks
    g = torch.Generator().manual_seed(world)
    xs = [torch.randn(n, generator=g).to(torch.bfloat16) for _ in range(world)]
    outs = _run_ranks(monkeypatch, fn, xs)
    for rank, out in enumerate(outs):
        want = _expected(kind, xs, rank)
        # bf16 adds round after each peer where the expectation rounds once: a few ulps for 4 ranks
        torch.testing.assert_close(out.reshape(-1), want, rtol=1.6e-2, atol=2e-2, msg=f"rank {rank} of {world}")
