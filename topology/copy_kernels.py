"""The probe's instruments, in Triton: SM copies (loads or stores to peer memory), TMA copies, a flag ping-pong.

A peer buffer is a torch tensor view of the other GPU's symmetric memory, so one copy kernel is a pull when
its source is the peer's and a push when its destination is. Spins have a poll cap: a broken protocol gives
up and reports failure instead of hanging the GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from pkroof.runtime.ptx import globaltimer, ld_acquire_sys, st_release_sys_thread0

COPY_BLOCK = 4096  # int32 elements per CTA per step: 16 KiB, 16-byte vector accesses
TMA_COLS = 256  # a TMA tile is TMA_ROWS x TMA_COLS int32: 64 x 256 x 4 B = 64 KiB
TMA_ROWS = 64
MAX_POLLS = 1 << 26


@triton.jit
def _copy_kernel(src, dst, n_elements, BLOCK: tl.constexpr):
    # grid-stride: CTA p copies blocks p, p + grid, p + 2·grid, ...
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for start in range(pid * BLOCK, n_elements, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_elements
        tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def sm_copy(src: torch.Tensor, dst: torch.Tensor, num_ctas: int) -> None:
    """dst[:] = src[:] with `num_ctas` CTAs of plain loads and stores (int32 views, 16-byte aligned)."""
    n = src.numel()
    _copy_kernel[(num_ctas,)](src, dst, n, BLOCK=COPY_BLOCK, num_warps=8)


@triton.jit
def _tma_copy_kernel(src, dst, n_rows, COLS: tl.constexpr, ROWS: tl.constexpr):
    src_desc = tl.make_tensor_descriptor(src, shape=[n_rows, COLS], strides=[COLS, 1], block_shape=[ROWS, COLS])
    dst_desc = tl.make_tensor_descriptor(dst, shape=[n_rows, COLS], strides=[COLS, 1], block_shape=[ROWS, COLS])
    num_tiles = tl.cdiv(n_rows, ROWS)
    for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        dst_desc.store([tile * ROWS, 0], src_desc.load([tile * ROWS, 0]))


def _tma_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def tma_copy(src: torch.Tensor, dst: torch.Tensor, num_ctas: int) -> None:
    """dst[:] = src[:] by TMA tile loads and stores; the element count must fill whole rows of TMA_COLS."""
    n = src.numel()
    assert n % TMA_COLS == 0, n
    triton.set_allocator(_tma_scratch)  # device-side descriptors need a little global scratch
    _tma_copy_kernel[(num_ctas,)](src, dst, n // TMA_COLS, COLS=TMA_COLS, ROWS=TMA_ROWS, num_warps=4)


@triton.jit(do_not_specialize=["base", "n_iters", "max_polls"])
def _pingpong_kernel(my_flag, peer_flag, out, base, n_iters, max_polls, INITIATOR: tl.constexpr):
    # round 0 is a handshake that absorbs the launch skew; rounds 1..n_iters are timed with %globaltimer
    ok = tl.full((), 1, tl.int32)
    t0 = globaltimer()
    i = tl.full((), 0, tl.int32)
    while (i <= n_iters) & (ok == 1):
        if i == 1:
            t0 = globaltimer()
        val = base + i
        if INITIATOR:
            st_release_sys_thread0(peer_flag, val)
        polls = tl.full((), 0, tl.int32)
        seen = ld_acquire_sys(my_flag)
        while (seen < val) & (polls < max_polls):  # flags only grow: '>=' lets a lagging warp catch up
            seen = ld_acquire_sys(my_flag)
            polls += 1
        ok = ok & (seen >= val).to(tl.int32)
        if not INITIATOR:  # noqa: SIM102 (a constexpr branch around a runtime one)
            if ok == 1:
                st_release_sys_thread0(peer_flag, val)
        i += 1
    tl.store(out + 0, ok.to(tl.int64))
    tl.store(out + 1, globaltimer() - t0)


def pingpong(
    my_flag: torch.Tensor, peer_flag: torch.Tensor, out: torch.Tensor, base: int, n_iters: int, initiator: bool
) -> None:
    """n_iters flag round trips with the peer in one launch; out = [ok, nanoseconds of the timed rounds]."""
    _pingpong_kernel[(1,)](
        my_flag.data_ptr(), peer_flag.data_ptr(), out, base, n_iters, MAX_POLLS, INITIATOR=initiator, num_warps=1
    )
