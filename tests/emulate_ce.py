"""pkroof's copy-engine collectives with N ranks emulated on one GPU: real DMAs, real flag kernels, real streams.

tests/test_copy_engine_cpu.py checks which bytes go where with the streams collapsed into threads; this runs the
same code on a GPU as it runs on a node, except that every rank lives on the one GPU. Each emulated rank has its
own calling stream, copy streams and signal stream, its own event flags and counters (the workspace's real signal
and wait kernels), and its own inbox, which the other ranks address as a peer buffer (the DMAs are local copies
here, not NVLink ones). The host issues every rank's calls one rank after another without waiting; the GPU runs
them together, each rank's waits spinning until the others' raises arrive, so the READY/FREE protocol, the
chunk order across copy streams and the one-credit reuse of the inboxes are checked with real asynchrony. Three
calls in a row with fresh inputs: a rank that overwrote an inbox slot before its peer consumed it, or a chunk
consumed before its DMA landed, gives wrong elements. Expected values: plain torch on the stacked inputs.

    python tests/emulate_ce.py          # every case; exits 1 on the first mismatch (needs one GPU)
    python tests/emulate_ce.py --time   # also times 2 emulated ranks by copy streams (local DMAs: a proxy only)
    python tests/emulate_ce.py --time-lanes   # also times 4 emulated ranks, a copy-stream lane per peer or one

A wait gives up after symm.MAX_POLLS polls, so a broken protocol gives wrong results, not a hang.
"""

from __future__ import annotations

import itertools
import os
import sys
from dataclasses import dataclass, field

os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")  # before CUDA starts: a hardware queue per stream,
# so one rank's spinning wait never sits in front of the raise it waits for
os.environ["CUDA_MODULE_LOADING"] = "EAGER"  # a kernel loaded lazily, at its first launch, can wait for the kernels
# running (CUDA's lazy-loading notes), here spinning waits that only a later rank's work would end

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch: no NCCL or symmetric memory here, and NVLink multicast stays off regardless

import torch  # noqa: E402

from pkroof.kernels import copy_engine, symm  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from emulate import _expected  # noqa: E402

COLLECTIVES = {
    "all-gather": copy_engine.all_gather_ce,
    "all-to-all": copy_engine.all_to_all_ce,
    "reduce-scatter": copy_engine.reduce_scatter_ce,
    "all-reduce": copy_engine.all_reduce_ce,
}


@dataclass
class EmulatedWorkspace(symm.Workspace):
    """A rank's workspace whose symmetric buffers are plain allocations that every emulated rank can reach."""

    shared: dict = field(default_factory=dict)  # (rank, name, numel, dtype) -> that rank's buffer

    def _of(self, rank: int, name: str, numel: int, dtype: torch.dtype) -> torch.Tensor:
        key = (rank, name, numel, dtype)
        if key not in self.shared:
            self.shared[key] = torch.full((numel,), float("nan"), dtype=dtype, device=self.device)
        return self.shared[key]

    def buffer(self, name, numel, dtype):
        key = ("table", name, numel, dtype)
        if key not in self.counters:  # made once: a host-to-device copy waits for this rank's stream
            peers = [self._of(p, name, numel, dtype) for p in range(self.world)]
            self.counters[key] = torch.tensor([b.data_ptr() for b in peers], dtype=torch.int64, device=self.device)
        return self._of(self.rank, name, numel, dtype), self.counters[key]

    def peer_view(self, name, numel, dtype, peer):
        return self._of(peer, name, numel, dtype)


class Ranks:
    """`world` emulated ranks on the current GPU; `call` makes copy_engine see each rank's workspace and streams
    while the host issues that rank's work.

    The host issues rank 0's whole call before rank 1's, so rank 0's waits spin on the GPU until rank 1's work is
    issued. Anything that synchronises the device in between (a cudaMalloc for a size the caching allocator has
    not cached; seen as wrong results in the first case of each collective and world on 2026-12-01) would wait
    for those spins, which wait for the host: a deadlock that only the waits' poll cap ends, with wrong results.
    So each rank's calling stream gets `reserve` bytes cached (large and small pools) before anything is issued,
    nothing else allocates during a call, and the flag kernels are compiled and loaded first (`warm`)."""

    modules = (copy_engine,)  # whose workspace() and side_stream() become the emulated rank's during its calls
    events = (copy_engine.CE_READY, copy_engine.CE_FREE)  # the point-to-point events those modules use

    def __init__(self, world: int, reserve: int = 8 << 20) -> None:
        device = torch.device("cuda", torch.cuda.current_device())
        zeros = lambda n, dtype=torch.int32: torch.zeros(n, dtype=dtype, device=device)  # noqa: E731
        events = [zeros(symm.EVENT_SLOTS * world) for _ in range(world)]
        event_table = torch.tensor([e.data_ptr() for e in events], dtype=torch.int64, device=device)
        shared: dict = {}
        counters = symm.EVENT_SLOTS * world

        def workspace(rank: int) -> EmulatedWorkspace:  # the collectives' CTA flags are not used by the copy engine
            unused = zeros(1), zeros(world, torch.int64), zeros(1)
            return EmulatedWorkspace(
                "emulated",
                device,
                rank,
                world,
                *unused,
                events[rank],
                event_table,
                zeros(counters),
                zeros(counters),
                shared=shared,
            )

        self.workspaces = [workspace(rank) for rank in range(world)]
        # torch.cuda.Stream() hands out torch's pool of 32 streams in turn: only the streams a rank uses are made,
        # so up to 8 ranks x (calling, copy, signal) or 4 ranks x (calling, 2 copy, signal) are all distinct
        self.streams: dict[tuple[int, int], torch.cuda.Stream] = {}
        self.main = [torch.cuda.Stream() for _ in range(world)]
        for stream in self.main:  # freed at once: cached for allocations on that stream
            with torch.cuda.stream(stream):
                torch.empty(reserve, dtype=torch.uint8, device=device)
                torch.empty(1 << 20, dtype=torch.uint8, device=device)  # a small-pool segment (2 MiB)
        torch.cuda.synchronize()
        self.rank = 0
        for module in self.modules:
            module.workspace = lambda: self.workspaces[self.rank]
            module.side_stream = self.side_stream

    def warm(self) -> None:
        """Compile and load every variant of the signal and wait kernels a call will launch (Triton specialises
        integer arguments equal to 1 or divisible by 16: rank, peer and credit), for every event the copy engine
        uses: every rank raises each event on every rank twice, then waits for each with and without a credit, so
        no wait spins on a raise not yet issued. The counters and flags are zeroed after."""
        for event in self.events:
            for ws, peer in itertools.product(self.workspaces, range(len(self.workspaces))):
                ws.signal(event, peer)
                ws.signal(event, peer)
        torch.cuda.synchronize()
        for event in self.events:
            for ws, peer in itertools.product(self.workspaces, range(len(self.workspaces))):
                ws.wait(event, peer)
                ws.wait(event, peer, credit=1)
        torch.cuda.synchronize()
        for ws in self.workspaces:
            ws.events.zero_()
            ws.sent.zero_()
            ws.received.zero_()
        torch.cuda.synchronize()

    def side_stream(self, index: int = 0) -> torch.cuda.Stream:
        key = (self.rank, index)
        if key not in self.streams:
            self.streams[key] = torch.cuda.Stream()
        return self.streams[key]

    def call(self, fn, inputs: list) -> list[torch.Tensor]:
        """fn on every rank, rank r on inputs[r] (a tensor, or a tuple of arguments); issued rank after rank, run
        together; not synchronised."""
        outs = []
        for rank, x in enumerate(inputs):
            self.rank = rank
            self.main[rank].wait_stream(torch.cuda.current_stream())  # the inputs were drawn there
            with torch.cuda.stream(self.main[rank]):
                outs.append(fn(*_args(x)))
        for main in self.main:
            torch.cuda.current_stream().wait_stream(main)
        return outs

    def capture(self, fn, inputs: list) -> tuple[list[torch.cuda.CUDAGraph], list]:
        """Each rank's call of fn on inputs[rank] captured in a CUDA graph on its calling stream: (graphs, outputs)."""
        graphs, outs = [], []
        for rank, x in enumerate(inputs):
            self.rank = rank
            graphs.append(torch.cuda.CUDAGraph())
            with torch.cuda.graph(graphs[-1], stream=self.main[rank]):
                outs.append(fn(*_args(x)))
        return graphs, outs

    def replay(self, graphs: list[torch.cuda.CUDAGraph]) -> None:
        """Every rank's graph once, issued rank after rank on its calling stream behind the current stream's work,
        run together; the current stream then waits for them all."""
        for rank, graph in enumerate(graphs):
            self.main[rank].wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.main[rank]):
                graph.replay()
        for main in self.main:
            torch.cuda.current_stream().wait_stream(main)


def _args(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def configure(schedule: str, streams: int, local_copy: str, tail_bytes: int, peer_lanes: bool = True) -> None:
    """The copy engine's launch settings for the calls that follow (read when each call runs), and its tail."""
    os.environ.update(
        {
            "PKROOF_CE_SCHEDULE": schedule,
            "PKROOF_CE_STREAMS": str(streams),
            "PKROOF_CE_LOCAL_COPY": local_copy,
            "PKROOF_CE_CHUNK": str(tail_bytes),
            "PKROOF_CE_PEER_STREAMS": "1" if peer_lanes else "0",
        }
    )
    copy_engine.TAIL_BYTES = tail_bytes  # a constant of the halving schedule, not a launch setting


def _fits(world: int, streams: int, peer_lanes: bool) -> bool:
    """Whether every rank's streams (calling, copy streams per lane, signal) stay distinct: torch.cuda.Stream()
    hands out a pool of 32 in turn, and the device has 32 hardware queues; two ranks sharing one would let one
    rank's spinning wait block the other's raise. Kept to 24, so the streams made before a case do not count."""
    lanes = world - 1 if peer_lanes else 1
    return world * (2 + streams * lanes) <= 24


def _wrong(kind: str, world: int, xs: list[torch.Tensor], outs: list[torch.Tensor]) -> str | None:
    for rank, out in enumerate(outs):
        want = _expected(kind, xs, rank)
        # the kernels add in bf16, rounding after each peer (at most half an ulp, 2^-9 of a partial sum under ~11
        # for 8 ranks of randn: 0.02 a rounding); the expectation rounds once. A misplaced or missing element is
        # off by O(1).
        atol = 0.025 * (world - 1) if kind in ("all-reduce", "reduce-scatter") else 0.0
        bad = ~torch.isclose(out.reshape(-1).float(), want.float(), rtol=1.6e-2, atol=atol)
        if bad.any():
            return f"rank {rank}: {int(bad.sum())} of {bad.numel()} wrong"
    return None


def _draw(g: torch.Generator, world: int, n: int) -> list[torch.Tensor]:
    return [torch.randn(n, generator=g, device="cuda").to(torch.bfloat16) for _ in range(world)]


def check(kind: str, world: int, n: int, calls: int = 3) -> str | None:
    """None if `calls` calls in a row are right on every rank, else what was wrong."""
    ranks = Ranks(world)
    ranks.warm()
    g = torch.Generator(device="cuda").manual_seed(world * 1000 + n)
    issued = []
    for _ in range(calls):
        xs = _draw(g, world, n)
        issued.append((xs, ranks.call(COLLECTIVES[kind], xs)))
    torch.cuda.synchronize()
    for call, (xs, outs) in enumerate(issued):
        why = _wrong(kind, world, xs, outs)
        if why is not None:
            return f"call {call}, {why}"
    return None


def check_graph(kind: str, world: int, n: int, replays: int = 3) -> str | None:
    """As the profiler times it: one eager call (it makes the inboxes), then each rank's call captured in a CUDA
    graph on that rank's calling stream, and all the graphs replayed together `replays` times on fresh inputs."""
    ranks = Ranks(world)
    ranks.warm()
    g = torch.Generator(device="cuda").manual_seed(world * 1000 + n + 1)
    xs = _draw(g, world, n)
    why = _wrong(kind, world, xs, ranks.call(COLLECTIVES[kind], xs))
    torch.cuda.synchronize()
    if why is not None:
        return f"eager call, {why}"
    graphs, outs = ranks.capture(COLLECTIVES[kind], xs)
    for replay in range(replays):
        fresh = _draw(g, world, n)
        for x, f in zip(xs, fresh, strict=True):
            x.copy_(f)
        torch.cuda.synchronize()
        ranks.replay(graphs)
        torch.cuda.synchronize()
        why = _wrong(kind, world, fresh, outs)
        if why is not None:
            return f"replay {replay}, {why}"
    return None


def cases():
    """(check, kind, world, elements, schedule, copy streams, local copy, a copy-stream lane per peer): odd chunks,
    several per call. Eager calls at every setting whose streams fit (_fits); graphs at 2-4 ranks with the default
    schedule and copy-out. At 2 ranks the lanes are one either way: run once."""
    for kind, world, schedule, streams, local, lanes in itertools.product(
        COLLECTIVES, (2, 3, 4, 8), ("halving", "equal"), (1, 2), ("sm", "dma"), (True, False)
    ):
        if (world == 2 and not lanes) or not _fits(world, streams, lanes):
            continue
        n = world * 3001 if kind in ("all-to-all", "reduce-scatter") else 3001
        yield check, kind, world, n, schedule, streams, local, lanes
        if world < 8 and (schedule, local) == ("halving", "sm"):
            yield check_graph, kind, world, n, schedule, streams, local, lanes


def run_all() -> int:
    failures = 0
    for fn, kind, world, n, schedule, streams, local, lanes in cases():
        configure(schedule, streams, local, tail_bytes=1024, peer_lanes=lanes)  # 512-element tail: 4-6 chunks
        why = fn(kind, world, n)
        label = f"{'graph' if fn is check_graph else 'eager'} {kind} world={world} n={n} schedule={schedule} "
        label += f"copy_streams={streams} local={local} peer_lanes={lanes}"
        print(f"{'ok  ' if why is None else 'FAIL'} {label}{'' if why is None else ': ' + why}", flush=True)
        failures += why is not None
    return failures


def time_streams(mib: int = 256) -> None:
    """Two emulated ranks on one GPU, back-to-back calls: µs per call (both ranks' work shares the GPU)."""
    for kind in COLLECTIVES:
        for streams in (1, 2):
            configure("halving", streams, "sm", tail_bytes=4 << 20)
            ranks = Ranks(2, reserve=2 * (mib << 20))
            ranks.warm()
            n = (mib << 20) // 2
            xs = [torch.randn(n, device="cuda").to(torch.bfloat16) for _ in range(2)]
            for _ in range(2):
                ranks.call(COLLECTIVES[kind], xs)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                ranks.call(COLLECTIVES[kind], xs)
            end.record()
            end.synchronize()
            print(f"time {kind} {mib} MiB, 2 emulated ranks, copy_streams={streams}: "
                  f"{start.elapsed_time(end) * 100:.1f} µs per call", flush=True)  # fmt: skip


def time_lanes(world: int = 4, sizes_mib: tuple[int, ...] = (1, 16, 64), replays: int = 10) -> None:
    """`world` emulated ranks on one GPU, one copy stream per lane, a lane per peer against one lane: µs per call,
    each rank's call captured in a CUDA graph and all the graphs replayed `replays` times (eager calls here are
    bound by the host issuing every rank's work: 2-7 ms a call, whatever the size). Every DMA is a local copy and
    all ranks share one GPU's copy engines and HBM, so this shows what queueing the peers' DMAs one after another
    costs on this GPU, not what NVLink would."""
    for kind in COLLECTIVES:
        for mib in sizes_mib:
            for lanes in (False, True):
                configure("halving", 1, "sm", tail_bytes=4 << 20, peer_lanes=lanes)
                n = (mib << 20) // 2  # bf16 elements of one rank's input
                ranks = Ranks(world, reserve=2 * world * (mib << 20))
                ranks.warm()
                xs = [torch.randn(n, device="cuda").to(torch.bfloat16) for _ in range(world)]
                ranks.call(COLLECTIVES[kind], xs)  # makes the inboxes
                torch.cuda.synchronize()
                graphs, _ = ranks.capture(COLLECTIVES[kind], xs)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                for _round in range(2):  # the first round untimed: the events keep the second
                    torch.cuda.synchronize()
                    start.record()
                    for _ in range(replays):
                        ranks.replay(graphs)
                    end.record()
                    end.synchronize()
                print(f"time {kind} {mib} MiB a rank, {world} emulated ranks, peer_lanes={lanes}: "
                      f"{start.elapsed_time(end) * 1000 / replays:.1f} µs per call", flush=True)  # fmt: skip
                del ranks, xs, graphs
                torch.cuda.empty_cache()


if __name__ == "__main__":
    print(f"# {torch.cuda.get_device_name()}, CUDA_DEVICE_MAX_CONNECTIONS={os.environ['CUDA_DEVICE_MAX_CONNECTIONS']}")
    bad = run_all()
    if "--time" in sys.argv:
        time_streams()
    if "--time-lanes" in sys.argv:
        time_lanes()
    sys.exit(1 if bad else 0)
