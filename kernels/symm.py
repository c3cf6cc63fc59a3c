"""Symmetric memory for pkroof's kernels: buffers every rank can address, peer pointer tables, and flags.

A `Workspace` belongs to one process group on one GPU. It hands out symmetric buffers by name and size
(allocated and rendezvoused once, collectively: every rank asks for the same buffers in the same order) and
holds the flags the kernels synchronise through:

- `flags`: a symmetric int32 array, slot (cta, source rank), one 128-byte line each. A CTA tells a peer "my
  part of step k is done" by setting the peer's slot (cta, me) to a value with a system-scope release store;
  the peer waits with acquire loads of its own memory until the slot reaches it. Each slot has one writer
  and its values only grow, so nothing is ever reset.
- `epochs`: a local int32 counter per CTA slot. Each kernel reads it, uses the next values for its steps
  and writes it back, on the device: calls captured once in a CUDA graph and replayed still count up,
  and every rank, running the same sequence of calls, agrees on the values.

Spins give up after MAX_POLLS (then the result is wrong and the profiler's check says so) instead of
hanging a GPU. NVLink multicast is never used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import triton
import triton.language as tl

from pkroof.runtime.ptx import ld_acquire_sys, st_release_sys_thread0

MAX_CTAS = 512  # flag slots per source rank; a kernel's grid never exceeds it
MAX_POLLS = 1 << 24
FLAG_STRIDE = 32  # int32s between flag slots: each slot on its own 128-byte line (no false sharing)
_POLLS = tl.constexpr(MAX_POLLS)  # the same numbers, as Triton reads globals inside kernels
_STRIDE = tl.constexpr(FLAG_STRIDE)


@triton.jit
def signal_peers(flag_table, slot, rank, value, WORLD: tl.constexpr):
    """Set flags[(slot * WORLD + rank) * STRIDE] to `value` on every peer, after all of this CTA's prior writes:
    bar.sync orders every thread's writes before thread 0's system-scope release store."""
    tl.debug_barrier()
    for p in tl.static_range(WORLD):
        if p != rank:
            peer_flags = tl.load(flag_table + p).to(tl.pointer_type(tl.int32))
            st_release_sys_thread0(peer_flags + (slot * WORLD + rank) * _STRIDE, value)


@triton.jit
def wait_peers(my_flags, slot, rank, value, WORLD: tl.constexpr):
    """Spin (acquire loads of local memory) until every peer's flag (slot, peer) here is at least `value`."""
    for p in tl.static_range(WORLD):
        if p != rank:
            addr = my_flags + (slot * WORLD + p) * _STRIDE
            seen = ld_acquire_sys(addr)
            polls = 0
            while (seen < value) & (polls < _POLLS):
                seen = ld_acquire_sys(addr)
                polls += 1
    tl.debug_barrier()


@triton.jit
def _barrier_kernel(flag_table, my_flags, epochs, rank, SLOT: tl.constexpr, WORLD: tl.constexpr):
    value = tl.load(epochs + SLOT) + 1
    signal_peers(flag_table, SLOT, rank, value, WORLD)
    wait_peers(my_flags, SLOT, rank, value, WORLD)
    tl.store(epochs + SLOT, value)


@triton.jit
def _signal_one_kernel(flag_table, counters, rank, peer, SLOT: tl.constexpr, WORLD: tl.constexpr):
    # counters[SLOT * WORLD + peer]: how many times this rank has raised (SLOT, rank) on that peer
    value = tl.load(counters + SLOT * WORLD + peer) + 1
    tl.debug_barrier()
    peer_flags = tl.load(flag_table + peer).to(tl.pointer_type(tl.int32))
    tl.atomic_max(peer_flags + SLOT * WORLD + rank, value, sem="release", scope="sys")
    tl.store(counters + SLOT * WORLD + peer, value)


@triton.jit
def _wait_one_kernel(my_flags, counters, peer, credit, SLOT: tl.constexpr, WORLD: tl.constexpr):
    # waits for the peer's next raise of (SLOT, peer) here; `credit` raises are owed up front (a free slot)
    value = tl.load(counters + SLOT * WORLD + peer) + 1
    seen = tl.atomic_add(my_flags + SLOT * WORLD + peer, 0, sem="acquire", scope="sys")
    polls = 0
    while (seen < value - credit) & (polls < _POLLS):
        seen = tl.atomic_add(my_flags + SLOT * WORLD + peer, 0, sem="acquire", scope="sys")
        polls += 1
    tl.store(counters + SLOT * WORLD + peer, value)


# point-to-point event slots (kept clear of the CTA slots that the collectives use)
BARRIER_SLOT = MAX_CTAS - 1
EVENT_SLOTS = 8  # events use a second flag array, slot (event, source rank)


@dataclass
class Workspace:
    group_name: str
    device: torch.device
    rank: int
    world: int
    flags: torch.Tensor  # symmetric int32 [MAX_CTAS * world * FLAG_STRIDE]
    flag_table: torch.Tensor  # int64 [world]: every rank's flags address
    epochs: torch.Tensor  # local int32 [MAX_CTAS]
    events: torch.Tensor  # symmetric int32 [EVENT_SLOTS * world]
    event_table: torch.Tensor
    sent: torch.Tensor  # local int32 [EVENT_SLOTS * world]: raises sent per (event, peer)
    received: torch.Tensor  # local int32 [EVENT_SLOTS * world]: raises consumed per (event, peer)
    buffers: dict[tuple, tuple[torch.Tensor, torch.Tensor, object]] = field(default_factory=dict)
    counters: dict[tuple, torch.Tensor] = field(default_factory=dict)
    group: dist.ProcessGroup | None = None

    def counter(self, key: tuple, numel: int = MAX_CTAS) -> torch.Tensor:
        """A local int32 counter per CTA slot, one array per key (e.g. the call parity of one staging buffer)."""
        if key not in self.counters:
            self.counters[key] = torch.zeros(numel, dtype=torch.int32, device=self.device)
        return self.counters[key]

    def split_flags(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(flags, flag table, epochs) of their own for split-role kernels, whose stagers and consumers count
        epochs separately (2 · MAX_CTAS counters); created zeroed on first use, collectively."""
        key = ("_split_flags", 0, None)
        if key not in self.buffers:
            flags, table, handle = _zeroed_flags(MAX_CTAS * self.world * FLAG_STRIDE, self.device, self.group_name,
                                                 self.world)  # fmt: skip
            torch.cuda.synchronize()
            dist.barrier(group=self.group)  # every rank's flags are zero before anyone raises one
            self.buffers[key] = (flags, table, handle)
        flags, table, _ = self.buffers[key]
        return flags, table, self.counter(("_split_epochs",), 2 * MAX_CTAS)

    def buffer(self, name: str, numel: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """A symmetric buffer (this rank's view) and its int64 table of every rank's address; allocated once
        per (name, numel, dtype), collectively."""
        key = (name, numel, dtype)
        if key not in self.buffers:
            buf, handle = _symmetric(numel, dtype, self.device, self.group_name)
            self.buffers[key] = (buf, _table(handle, buf, self.world), handle)
        buf, table, _ = self.buffers[key]
        return buf, table

    def zeroed_buffer(self, name: str, numel: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """As `buffer`, but zero on every rank before any rank's first use returns (for kernels that poll a
        buffer's own contents); the first call is collective, as allocation is, and cannot be graph-captured."""
        if (name, numel, dtype) not in self.buffers:
            buf, _ = self.buffer(name, numel, dtype)
            buf.zero_()
            torch.cuda.synchronize()
            dist.barrier(group=self.group)  # no peer writes into it before it is zeroed
        return self.buffer(name, numel, dtype)

    def peer_view(self, name: str, numel: int, dtype: torch.dtype, peer: int) -> torch.Tensor:
        """Rank `peer`'s copy of a buffer, addressable from this GPU (copy-engine transfers go through it)."""
        self.buffer(name, numel, dtype)
        buf, _, handle = self.buffers[(name, numel, dtype)]
        return buf if peer == self.rank else handle.get_buffer(peer, (numel,), dtype)

    def barrier(self) -> None:
        """All ranks reach this point in stream order (one CTA; prior copies on this stream are complete)."""
        _barrier_kernel[(1,)](
            self.flag_table, self.flags, self.epochs, self.rank, SLOT=BARRIER_SLOT, WORLD=self.world, num_warps=1
        )

    def signal(self, event: int, peer: int) -> None:
        """Tell `peer` that event `event` happened here (after this stream's prior work)."""
        _signal_one_kernel[(1,)](
            self.event_table, self.sent, self.rank, peer, SLOT=event, WORLD=self.world, num_warps=1
        )

    def wait(self, event: int, peer: int, credit: int = 0) -> None:
        """Hold this stream until `peer` signals `event` here once more (the first `credit` waits pass free)."""
        _wait_one_kernel[(1,)](self.events, self.received, peer, credit, SLOT=event, WORLD=self.world, num_warps=1)


def _rendezvous(buf: torch.Tensor, group_name: str):
    import torch.distributed._symmetric_memory as symm_mem

    try:
        return symm_mem.rendezvous(buf, group_name)
    except RuntimeError:  # older torch: the group must be enabled for symmetric memory first
        symm_mem.enable_symm_mem_for_group(group_name)
        return symm_mem.rendezvous(buf, group_name)


def _symmetric(numel: int, dtype: torch.dtype, device: torch.device, group_name: str):
    import torch.distributed._symmetric_memory as symm_mem

    buf = symm_mem.empty(numel, dtype=dtype, device=device)
    return buf, _rendezvous(buf, group_name)


def _table(handle, buf: torch.Tensor, world: int) -> torch.Tensor:
    ptrs = [handle.get_buffer(p, (buf.numel(),), buf.dtype).data_ptr() for p in range(world)]
    return torch.tensor(ptrs, dtype=torch.int64, device=buf.device)


def _zeroed_flags(numel: int, device: torch.device, group_name: str, world: int):
    flags, handle = _symmetric(numel, torch.int32, device, group_name)
    flags.zero_()
    return flags, _table(handle, flags, world), handle


_SIDE_STREAMS: dict[tuple[int, int], torch.cuda.Stream] = {}


def side_stream(index: int = 0) -> torch.cuda.Stream:
    """Side stream `index` of the current GPU, made once and reused; callers fork onto it from their stream and
    join back before returning, so implementations may share one."""
    key = (torch.cuda.current_device(), index)
    if key not in _SIDE_STREAMS:
        _SIDE_STREAMS[key] = torch.cuda.Stream()
    return _SIDE_STREAMS[key]


_WORKSPACES: dict[tuple[str, int], Workspace] = {}


def workspace(group: dist.ProcessGroup | None = None) -> Workspace:
    """This process's workspace for `group` (default: the world) on the current GPU; created collectively."""
    group = group or dist.group.WORLD
    device = torch.device("cuda", torch.cuda.current_device())
    key = (group.group_name, device.index)
    if key not in _WORKSPACES:
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        flags, flag_table, h1 = _zeroed_flags(MAX_CTAS * world * FLAG_STRIDE, device, group.group_name, world)
        events, event_table, h2 = _zeroed_flags(EVENT_SLOTS * world, device, group.group_name, world)
        torch.cuda.synchronize()
        dist.barrier(group=group)  # every rank's flags are zero before anyone raises one
        ws = Workspace(
            group.group_name,
            device,
            rank,
            world,
            flags,
            flag_table,
            torch.zeros(MAX_CTAS, dtype=torch.int32, device=device),
            events,
            event_table,
            torch.zeros(EVENT_SLOTS * world, dtype=torch.int32, device=device),
            torch.zeros(EVENT_SLOTS * world, dtype=torch.int32, device=device),
            group=group,
        )
        # the flags' rendezvous handles live with the other buffers' (they keep the peer mappings alive)
        ws.buffers[("_flags", 0, None)] = (flags, flag_table, h1)
        ws.buffers[("_events", 0, None)] = (events, event_table, h2)
        _WORKSPACES[key] = ws
    return _WORKSPACES[key]
