"""The latency probe's Triton kernels: a flag ping-pong and a message written with SM stores plus a flag, each timed
inside the kernel by the GPU's globaltimer; the layout of the symmetric int32 buffer they share, in int32 words.

Imported by small_message_latency.py once it has forced NVLink multicast off (before torch is imported)."""

from __future__ import annotations

import triton
import triton.language as tl

from pkroof.runtime.ptx import fence_acq_rel_sys, globaltimer, ld_acquire_sys, st_release_sys_thread0

# Layout of the symmetric int32 buffer (indices in int32 words).
SYMM_WORDS = 1 << 17  # 512 KiB
FLAG_PP = 0  # ping-pong flag word (each rank polls its own, the peer writes it)
FLAG_MSG = 32  # message flag word (rank 1's is "message arrived", rank 0's is "reply")
CE_SRC = 1024  # 64 KiB source region for pulls
CE_DST = CE_SRC + 16384  # 64 KiB destination region for pushes
MSG = CE_DST + 16384  # 64 KiB message region for the SM-store test
assert MSG + 16384 <= SYMM_WORDS

MAX_POLLS = 1 << 26  # spin cap: a broken protocol gives up instead of hanging the GPU


@triton.jit
def _wait_ge(addr, val, max_polls):
    # Flag values only grow, so ">=" lets a warp that lags behind its CTA's others catch up safely.
    n = tl.full((), 0, tl.int32)
    seen = ld_acquire_sys(addr)
    while (seen < val) & (n < max_polls):
        seen = ld_acquire_sys(addr)
        n += 1
    return (seen >= val).to(tl.int32), n


@triton.jit(do_not_specialize=["base", "n_iters", "max_polls"])
def _pingpong_kernel(my_flag, peer_flag, out_ptr, base, n_iters, max_polls, INITIATOR: tl.constexpr):
    # Round 0 is a handshake (absorbs the launch skew between the two processes); rounds 1..n_iters are timed.
    ok = tl.full((), 1, tl.int32)
    polls = tl.full((), 0, tl.int64)
    t0 = globaltimer()
    i = tl.full((), 0, tl.int32)
    while (i <= n_iters) & (ok == 1):
        if i == 1:
            t0 = globaltimer()
            polls = tl.full((), 0, tl.int64)  # count the timed rounds' polls only
        val = base + i
        if INITIATOR:
            st_release_sys_thread0(peer_flag, val)
            good, n = _wait_ge(my_flag, val, max_polls)
        else:
            good, n = _wait_ge(my_flag, val, max_polls)
            if good == 1:
                st_release_sys_thread0(peer_flag, val)
        ok = ok & good
        polls += n.to(tl.int64)
        i += 1
    t1 = globaltimer()
    tl.store(out_ptr + 0, ok.to(tl.int64))
    tl.store(out_ptr + 1, t1 - t0)
    tl.store(out_ptr + 2, polls)
    tl.store(out_ptr + 3, i.to(tl.int64))


@triton.jit(do_not_specialize=["base", "n_iters", "max_polls"])
def _message_kernel(
    my_flag,
    peer_flag,
    msg_addr,
    out_ptr,
    base,
    n_iters,
    max_polls,
    n_words,
    INITIATOR: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # INITIATOR (rank 0): msg_addr = the peer's message region; writes n_words int32 = round value with plain
    #   stores, fence.acq_rel.sys by every thread, CTA barrier, release-store of the peer's flag, waits for reply.
    # responder (rank 1): msg_addr = its own message region; waits for the flag (acquire), checks the first and
    #   last word of the message, then release-stores the reply flag into rank 0's word.
    ok = tl.full((), 1, tl.int32)
    bad = tl.full((), 0, tl.int64)
    polls = tl.full((), 0, tl.int64)
    t0 = globaltimer()
    i = tl.full((), 0, tl.int32)
    msg = msg_addr.to(tl.pointer_type(tl.int32))  # 4-byte stores, 128 contiguous bytes per warp instruction
    while (i <= n_iters) & (ok == 1):
        if i == 1:
            t0 = globaltimer()
        val = base + i
        if INITIATOR:
            for start in range(0, n_words, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                tl.store(msg + offs, tl.full((BLOCK,), 0, tl.int32) + val)
            fence_acq_rel_sys()
            tl.debug_barrier()
            st_release_sys_thread0(peer_flag, val)
            good, n = _wait_ge(my_flag, val, max_polls)
        else:
            good, n = _wait_ge(my_flag, val, max_polls)
            first = tl.load(msg, volatile=True)
            last = tl.load(msg + (n_words - 1), volatile=True)
            bad += ((first != val) | (last != val)).to(tl.int64)
            if good == 1:
                st_release_sys_thread0(peer_flag, val)
        ok = ok & good
        polls += n.to(tl.int64)
        i += 1
    t1 = globaltimer()
    tl.store(out_ptr + 0, ok.to(tl.int64))
    tl.store(out_ptr + 1, t1 - t0)
    tl.store(out_ptr + 2, polls)
    tl.store(out_ptr + 3, i.to(tl.int64))
    tl.store(out_ptr + 4, bad)
