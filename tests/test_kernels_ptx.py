"""pkroof's collective kernel compiled for Hopper (sm_90) without a GPU: what the PTX must and must not hold.

- 16-byte accesses only on the data path. The first version's PTX had scalar 2-byte ld/st.global.b16 for
  every element (pointers loaded from the peer table carried no alignment), and ran 2-4× slower on 2×H200.
- Flags by system-scope release stores and acquire loads (the protocol kernels/symm.py describes).
- No multimem / multicast instruction: NVLink multicast must never be used unless a user asks for it.
Triton compiles for a target it is given, with its bundled ptxas; no driver is needed.
"""

import re

import pytest

pytest.importorskip("torch")  # the kernels' modules build their launch arguments with torch
triton = pytest.importorskip("triton")

ARGS = ["x", "out", "stage_table", "flag_table", "my_flags", "epochs", "calls", "rank", "n_tiles", "grid", "span",
        "slot", "chunk", "half_size"]  # fmt: skip
TYPES = ["*bf16", "*bf16", "*i64", "*i64", "*i32", "*i32", "*i32", "i32", "i32", "i32", "i32", "i32", "i32", "i32"]
# what Triton's launcher specialises when pointers are 16-byte aligned and sizes multiples of 16 (as exchange()
# guarantees for slots and buffers; x, out and chunk are so for the suite's sizes)
ALIGNED = {"x", "out", "stage_table", "flag_table", "my_flags", "epochs", "calls", "span", "slot", "chunk",
           "half_size"}  # fmt: skip


def _compiled(kind: int, push: bool, phase: int = 0, tma: bool = False, split: bool = False, block: int = 4096):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from pkroof.kernels.symm_collectives import _exchange_kernel, _split_kernel

    signature = dict(zip(ARGS, TYPES, strict=True)) | dict.fromkeys(
        ["KIND", "PUSH", "WORLD", "BLOCK", "SUB", "PHASE", "TMA"], "constexpr"
    )
    constants = {"KIND": kind, "PUSH": push, "WORLD": 4, "BLOCK": block, "SUB": 4, "PHASE": phase, "TMA": tma}
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(ARGS) if name in ALIGNED}
    source = ASTSource(_split_kernel if split else _exchange_kernel, signature, constants, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})


def _ptx(kind: int, push: bool, phase: int = 0, tma: bool = False, split: bool = False) -> str:
    return _compiled(kind, push, phase, tma, split).asm["ptx"]


@pytest.mark.parametrize("split", [False, True], ids=["one-role", "split-roles"])
@pytest.mark.parametrize("push", [False, True], ids=["pull", "push"])
@pytest.mark.parametrize("kind", [0, 1, 2, 3], ids=["all-reduce", "all-gather", "reduce-scatter", "all-to-all"])
def test_ptx_data_path_flags_and_no_multicast(kind, push, split):
    ptx = _ptx(kind, push, split=split)
    accesses = re.findall(r"\b((?:ld|st)\.global[.\w]*)", ptx)
    assert any(".v4." in a for a in accesses if a.startswith("ld")), accesses
    assert any(".v4." in a for a in accesses if a.startswith("st")), accesses
    assert not [a for a in accesses if a.endswith(".b16")], "scalar 2-byte accesses are back"
    assert "st.release.sys.global.b32" in ptx and "ld.acquire.sys.global.b32" in ptx
    assert "multimem" not in ptx


def test_emulation_phases_have_no_flags():
    # phase 1 (stage only) and 2 (consume only) let the tests run emulated ranks one after another
    for phase in (1, 2):
        ptx = _ptx(0, True, phase)
        assert "st.release.sys" not in ptx and "ld.acquire.sys" not in ptx


@pytest.mark.parametrize("kind", [0, 1, 2, 3], ids=["all-reduce", "all-gather", "reduce-scatter", "all-to-all"])
def test_tma_push_uses_bulk_tensor_copies_and_completes_them_before_the_flag(kind):
    ptx = _ptx(kind, True, tma=True)
    assert "cp.async.bulk.tensor" in ptx  # the remote stores are TMA bulk copies
    # the flag's release store must not overtake the bulk copies: wait for them, then a proxy fence, then the flag
    complete = ptx.find("cp.async.bulk.wait_group 0; fence.proxy.async.global;")
    assert complete >= 0 and ptx.find("st.release.sys", complete) > complete
    assert "multimem" not in ptx


@pytest.mark.parametrize("kind", [0, 1, 2, 3], ids=["all-reduce", "all-gather", "reduce-scatter", "all-to-all"])
def test_the_default_tma_box_fits_in_shared_memory(kind):
    from pkroof.kernels.settings import setting

    # an H100/H200 CTA may use at most 227 KiB (232448 bytes) of shared memory, or the launch fails; the largest
    # blocks the kernel picks by default must compile within it, TMA's (bulk copies) and the SM stores'
    for tma, block in ((True, setting("PKROOF_TMA_MAX_BLOCK")), (False, setting("PKROOF_MAX_BLOCK"))):
        shared = _compiled(kind, True, tma=tma, block=block).metadata.shared
        assert shared <= 232448, (tma, block, shared)


def _inter_sm_ptx(kernel: str, group: int = 1):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from pkroof.kernels import inter_sm
    from pkroof.kernels.settings import setting

    if kernel == "gemm":  # the shipped tile; A, B, C 16-byte aligned and k, n multiples of 16, as at the suite's shapes
        args = {"a": "*bf16", "b": "*bf16", "c": "*bf16", "band_ready": "*i32", "m": "i32", "n": "i32", "k": "i32",
                "n_ctas": "i32"}  # fmt: skip
        bm, bn, bk, stages, warps = setting("PKROOF_INTER_SM_TILE")
        constants = {"BM": bm, "BN": bn, "BK": bk, "STAGES": stages, "GROUP": group, "UPCAST": False}
        fn, aligned = inter_sm._gemm_kernel, {"a", "b", "c", "band_ready", "n", "k"}
    else:
        names = ["staging", "out", "inbox_table", "flag_table", "my_flags", "epochs", "calls", "unit_seen",
                 "band_ready", "rank", "m", "n", "bm", "rows_per_unit", "n_units", "half_size", "slot_size",
                 "tiles_n"]  # fmt: skip
        args = {name: ("*bf16" if i < 2 else "*i64" if i < 4 else "*i32" if i < 9 else "i32") for i, name in
                enumerate(names)}  # fmt: skip
        pieces, block = setting("PKROOF_INTER_SM_PIECES"), setting("PKROOF_INTER_SM_BLOCK")
        constants = {"WORLD": 4, "PIECES": pieces, "BLOCK": block, "PHASE": 0}
        # n = 776 (a multiple of 8, not of 16) is not marked aligned: the kernel must know it from n % 8 == 0
        fn, aligned, warps = inter_sm._reduce_kernel, set(names[:9]) | {"half_size", "slot_size"}, 8
    signature = args | dict.fromkeys(constants, "constexpr")
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(args) if name in aligned}
    return triton.compile(ASTSource(fn, signature, constants, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": warps})  # fmt: skip


@pytest.mark.parametrize("group", [1, 8])  # row-major (shipped), and tiles in groups of 8 bands
def test_inter_sm_gemm_uses_tensor_cores_and_tma_and_fits_shared_memory(group):
    compiled = _inter_sm_ptx("gemm", group)
    ptx = compiled.asm["ptx"]
    assert "wgmma.mma_async" in ptx  # Hopper's tensor-core instruction
    assert "cp.async.bulk.tensor" in ptx  # A and B tiles by TMA
    # the band counter: after the tile's stores, at GPU scope (an atom, or a red where the result is unused: Triton 3.9)
    assert re.search(r"(?:atom|red)\.global\.gpu\.release\.add", ptx)
    assert compiled.metadata.shared <= 232448  # an H200 CTA may use 227 KiB of shared memory
    assert "multimem" not in ptx


def test_inter_sm_communication_is_16_byte_accesses_and_flags():
    ptx = _inter_sm_ptx("reduce").asm["ptx"]
    data = re.findall(r"(?:ld|st)\.global(?:\.[a-z0-9]+)*\.(?:b16|v4\.b32|v2\.b32|b32)", ptx)
    assert any("v4.b32" in d for d in data)
    assert not any(d.endswith(".b16") for d in data)  # no element-wise 2-byte access anywhere
    assert "st.release.sys" in ptx and "ld.acquire.sys" in ptx  # the peers' flags
    assert "ld.global.gpu.acquire" in ptx  # the band counters the GEMM raises (Triton turns the add of 0 into a load)
    assert "multimem" not in ptx


@pytest.mark.parametrize("block", [256, 512, 4096])
@pytest.mark.parametrize("kind", ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"])
def test_ll_collectives_move_whole_lines_and_have_no_fence(kind, block):
    # kernels/low_latency.py: data and flag share each 8-byte line, so the sends must be 8-byte (vector) stores and the
    # polls volatile 8-byte loads, never split into 4-byte halves a receiver could see apart; and nothing orders them
    # (no fence, no release): that is what the protocol saves over the flag hand-off
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from pkroof.kernels.low_latency import KINDS, _ll_kernel

    names = ["x", "out", "table", "calls", "rank", "n_words", "lines", "n_tiles", "grid"]
    args = dict(zip(names, ["*i32", "*i32", "*i64", "*i32", "i32", "i32", "i32", "i32", "i32"], strict=True))
    chunked, reduce = KINDS[kind]
    constants = {"DTYPE": 1, "WORLD": 4, "BLOCK": block, "PHASE": 0, "CHUNKED": chunked, "REDUCE": reduce}
    aligned = {"x", "out", "table", "calls", "n_words", "lines"}  # as the launcher specialises 16-multiples
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(names) if name in aligned}
    source = ASTSource(_ll_kernel, args | dict.fromkeys(constants, "constexpr"), constants, attrs=attrs)
    ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"]
    sends = re.findall(r"st\.global[.\w]*\.b64", ptx)
    polls = re.findall(r"ld\.volatile\.global[.\w]*", ptx)
    assert sends and all(".v2.b64" in s for s in sends), sends
    assert polls and all(p.endswith(".v2.b64") for p in polls), polls
    assert not re.search(r"\bfence\.|\bmembar\.|\.release\.", ptx)
    assert "multimem" not in ptx
