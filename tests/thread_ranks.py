"""Ranks as threads of one process, for kernels whose only cross-rank steps are the workspace's point-to-point
events and peer buffers (kernels/copy_engine.py, the copy-engine overlaps of kernels/fused.py).

A stand-in workspace gives each thread-rank its own named buffers (NaN-filled, so a slot nobody wrote fails the
comparison), lets every rank address every other's (as symmetric memory does), and makes the point-to-point
events counters under one condition variable (a wait blocks its thread until the peer's raise, as the wait
kernel blocks its stream). On a GPU the copies are DMAs on side streams and the events are kernels; here the
streams collapse into the calling thread, so the same code checks which bytes go where and that the READY/FREE
protocol (with its one credit) neither deadlocks nor lets a rank overwrite an inbox slot its peer has not
consumed.
"""

import contextlib
import threading

import torch


class _Shared:
    def __init__(self, world: int):
        self.world = world
        self.buffers: list[dict] = [{} for _ in range(world)]
        self.lock = threading.Lock()
        self.raised: dict[tuple[int, int, int], int] = {}  # (event, source, destination) -> raises so far
        self.changed = threading.Condition()
        self.aborted = False


class _Workspace:
    def __init__(self, shared: _Shared, rank: int):
        self.shared, self.rank, self.world = shared, rank, shared.world
        self.received: dict[tuple[int, int], int] = {}

    def _of(self, rank: int, name: str, numel: int, dtype):
        with self.shared.lock:
            return self.shared.buffers[rank].setdefault(
                (name, numel, dtype), torch.full((numel,), float("nan"), dtype=dtype)
            )

    def buffer(self, name, numel, dtype):
        return self._of(self.rank, name, numel, dtype), None

    def peer_view(self, name, numel, dtype, peer):
        return self._of(peer, name, numel, dtype)

    def signal(self, event, peer):
        with self.shared.changed:
            key = (event, self.rank, peer)
            self.shared.raised[key] = self.shared.raised.get(key, 0) + 1
            self.shared.changed.notify_all()

    def wait(self, event, peer, credit=0):
        value = self.received[(event, peer)] = self.received.get((event, peer), 0) + 1
        with self.shared.changed:
            ok = self.shared.changed.wait_for(
                lambda: self.shared.aborted or self.shared.raised.get((event, peer, self.rank), 0) >= value - credit,
                timeout=300,  # a hang, not a slow machine: generous
            )
        assert ok and not self.shared.aborted, f"rank {self.rank} waited for event {event} from {peer} in vain"


class _Inline:
    """The calling thread stands in for every stream: copy_engine.Streams and fused.Side alike."""

    def __init__(self, peers=1):
        pass

    def on_copy(self, chunk=0, peer=0):
        return contextlib.nullcontext()

    def copies_after_first(self):
        pass

    def after_copies(self, chunk, fn):
        fn()

    def main_after_copy_so_far(self):
        pass

    def after_main(self):
        return contextlib.nullcontext()

    def on_side(self):
        return contextlib.nullcontext()

    def join(self):
        pass


def run_ranks(monkeypatch, module, fn, calls):
    """calls[i][rank]: the arguments (a tuple) of rank's call i of fn, a function of `module`; returns outs[i][rank].
    Every call has fresh inputs, so a rank that overwrote a peer's inbox slot before the peer consumed it would show
    up as a wrong element."""
    world = len(calls[0])
    shared, local = _Shared(world), threading.local()
    monkeypatch.setattr(module, "workspace", lambda: local.ws)
    for streams in ("Streams", "Side"):
        if hasattr(module, streams):
            monkeypatch.setattr(module, streams, _Inline)
    outs, errors = [[None] * world for _ in calls], []

    def rank_main(rank):
        local.ws = _Workspace(shared, rank)
        try:
            for i, args in enumerate(calls):
                outs[i][rank] = fn(*args[rank])
        except Exception as e:  # reported below, with the rank
            errors.append((rank, e))
            with shared.changed:
                shared.aborted = True
                shared.changed.notify_all()

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return outs
