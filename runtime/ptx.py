"""The PTX that pkroof's Triton kernels synchronise and time with, in one place (kernels and the probe share it).

Flags are int32 words in (symmetric) global memory. A writer releases at system scope, so every store the CTA
made before is visible to a peer GPU that acquires the flag; readers acquire at system scope. Nothing here uses
NVLink multicast.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def ld_acquire_sys(addr):
    """The int32 at `addr`, loaded with acquire semantics at system scope (every thread loads)."""
    return tl.inline_asm_elementwise(
        "ld.acquire.sys.global.b32 $0, [$1];", "=r,l", [addr], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def st_release_sys_thread0(addr, val):
    """Thread 0 of the CTA stores `val` at `addr` with release semantics at system scope; the others do nothing.
    Callers put a CTA barrier before it, so every thread's earlier stores are ordered before the release."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "@p st.release.sys.global.b32 [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r",
        [addr, val],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def fence_acq_rel_sys():
    """A system-scope acquire-release fence."""
    return tl.inline_asm_elementwise(
        "fence.acq_rel.sys; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def globaltimer():
    """The GPU's global nanosecond timer (int64)."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
