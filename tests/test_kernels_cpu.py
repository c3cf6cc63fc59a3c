"""pkroof's built-in implementations without a GPU: the registry, the kernels' layouts, declared pairs."""

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import emulate
import emulate_ll
import pytest

from pkroof.analysis.catalogue import load, names
from pkroof.kernels.registry import BUILTIN_IMPLS
from pkroof.rooflines import Mechanism, Schedule


def test_registry_names_suite_problems_and_imports_nothing_heavy():
    for name, impl in BUILTIN_IMPLS.items():
        assert impl.problems and impl.problems <= set(names()), name
        assert impl.family in ("ecosystem", "pkroof")
    # listing the registry (as `pkroof profile` does on CPU) must not pull in triton
    code = "import sys; import pkroof.kernels.registry; print('triton' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_every_collective_has_an_automatic_pkroof_peer():
    # the profiler runs these beside the reference unasked; the slower siblings only when named
    auto = {p for impl in BUILTIN_IMPLS.values() if impl.family == "pkroof" and impl.auto for p in impl.problems}
    assert {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"} <= auto
    assert {"gemm-reduce-scatter", "all-gather-gemm", "gemm-all-reduce"} <= auto
    assert not BUILTIN_IMPLS["pkroof-two-shot"].auto


def test_pkroof_implementations_declare_valid_pairs():
    # the registry declares every built-in's pair (kernels/registry.py), readable without triton
    for name, impl in BUILTIN_IMPLS.items():
        if impl.family != "pkroof":
            continue
        pair = impl.pair
        assert pair is not None, name
        assert Mechanism(pair["mechanism"]) is not Mechanism.MULTIMEM  # never shipped: nobody here can run it
        assert Schedule(pair["schedule"]) in Schedule
        if pair["schedule"] == "serial":  # a collective is predicted with the algorithm it runs, not the cheapest
            assert pair["algorithm"] == ("two-shot" if name.startswith("pkroof-two-shot") else "one-shot"), name
    # and only there: no built-in function carries a pair of its own (@declare is for users' implementations)
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from pkroof.kernels.declare import declared

    for name, impl in BUILTIN_IMPLS.items():
        assert callable(impl.fn) and declared(impl.fn) is None, name


def test_communication_ctas_are_read_from_the_settings_when_asked(monkeypatch):
    # a pair names the setting its CTAs come from, read when the pair is asked for (as when a kernel runs)
    monkeypatch.delenv("PKROOF_CTAS_STORE", raising=False)
    monkeypatch.delenv("PKROOF_INTER_SM_CTAS", raising=False)
    assert BUILTIN_IMPLS["pkroof-one-shot-push"].pair["comm_sms"] == 128  # PKROOF_CTAS_STORE's default
    assert BUILTIN_IMPLS["pkroof-gemm-ar-inter-sm"].pair["comm_sms"] is None  # per shape, reported per call
    assert BUILTIN_IMPLS["pkroof-all-reduce-ce"].pair["comm_sms"] == 0
    monkeypatch.setenv("PKROOF_CTAS_STORE", "64")
    monkeypatch.setenv("PKROOF_INTER_SM_CTAS", "12")
    assert BUILTIN_IMPLS["pkroof-one-shot-push"].pair["comm_sms"] == 64
    assert BUILTIN_IMPLS["pkroof-gemm-ar-inter-sm"].pair["comm_sms"] == 12


# settings nothing may read at import: a bad value of each (kernels/settings.py refuses them)
_BAD_SETTINGS = {
    "PKROOF_CTAS_LL": "0",
    "PKROOF_CTAS_STORE": "-1",
    "PKROOF_MAX_BLOCK": "big",
    "PKROOF_CE_SCHEDULE": "fastest",
    "PKROOF_INTER_SM_CTAS": "0",
    "PKROOF_INTER_SM_TILE": "128,256",
    "PKROOF_INTER_SM_GROUP": "0",
}
# in a fresh process with _BAD_SETTINGS set: import every kernel module, then call, for each setting, a path a launch
# takes through it; print {setting: the ValueError's message, or None where nothing was raised}
_IMPORT_THEN_LAUNCH = """
import json

import torch

from pkroof.kernels import copy_engine, ecosystem, fused, inter_sm, low_latency, symm_collectives  # nothing read here
from pkroof.kernels.settings import setting

x = torch.zeros(64, dtype=torch.bfloat16)
paths = {
    "PKROOF_CTAS_LL": lambda: low_latency.ctas_used("all-reduce", x, 2),
    "PKROOF_CTAS_STORE": lambda: symm_collectives.all_reduce_one_shot_push(x),
    "PKROOF_MAX_BLOCK": lambda: symm_collectives._tiling(1 << 20, 128),
    "PKROOF_CE_SCHEDULE": lambda: copy_engine.chunk_bounds(1001, 2),
    "PKROOF_INTER_SM_CTAS": lambda: inter_sm.comm_ctas(7168, 2),
    "PKROOF_INTER_SM_TILE": lambda: inter_sm.gemm(x.view(8, 8), x.view(8, 8), x.view(8, 8), x, 4),
    "PKROOF_INTER_SM_GROUP": lambda: setting("PKROOF_INTER_SM_GROUP"),
}
said = {}
for name, path in paths.items():
    try:
        path()
        said[name] = None
    except ValueError as e:
        said[name] = str(e)
print(json.dumps(said))
"""


def test_launch_settings_are_read_when_a_kernel_runs_not_at_import():
    # bad values in the environment: every kernel module still imports (none reads a setting at import, so listing
    # or importing the kernels never fails on one), and the first launch that reads one refuses it in one line
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    env = {**os.environ, **_BAD_SETTINGS}
    done = subprocess.run([sys.executable, "-c", _IMPORT_THEN_LAUNCH], capture_output=True, text=True, env=env,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(said) == set(_BAD_SETTINGS)
    for name, value in _BAD_SETTINGS.items():
        message = said[name]
        assert message is not None, f"{name}={value!r} was not refused"
        assert message.startswith(f"{name}={value!r}: must be") and "\n" not in message, message


def test_inter_sm_communication_ctas_follow_the_inner_size(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from pkroof.kernels import inter_sm

    monkeypatch.delenv("PKROOF_INTER_SM_CTAS", raising=False)
    # C holds e·m·n bytes for 2·m·n·K FLOPs: communication per unit of compute is e/(2K). The 2xH200 sweeps' best
    # were 16 CTAs at K = 7168 and 8 at K = 14336 (bf16, e = 2): 16·7168 = 8·14336 = 114688 CTA·K
    assert inter_sm.comm_ctas(7168, 2) == 16 and inter_sm.comm_ctas(14336, 2) == 8
    assert inter_sm.comm_ctas(10000, 2) == 12  # 114688 / 10000 = 11.5, rounded up
    assert inter_sm.comm_ctas(14336, 4) == 16  # fp32: twice the bytes per FLOP, twice the CTAs
    assert inter_sm.comm_ctas(128, 2) == 32  # 896 wanted: the sweeps covered 4..32
    assert inter_sm.comm_ctas(10**6, 2) == 4
    monkeypatch.setenv("PKROOF_INTER_SM_CTAS", "12")  # the setting, read when the kernel runs, fixes it
    assert inter_sm.comm_ctas(7168, 2) == 12


def test_copy_engine_gemm_all_reduce_goes_one_shot_only_where_it_costs_no_link_time_worth_a_stage():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from pkroof.kernels.fused import one_shot

    # 2 ranks: one-shot and two-shot put the same (P − 1)·S = 2·(P − 1)/P·S on the link; one-shot up to 4 MiB
    assert one_shot(4 << 20, 2) and not one_shot((4 << 20) + 2, 2)
    # 4 ranks: (P − 1)(P − 2)/P·S = 1.5·S more; within 512 KiB up to S = 512/1.5 = 341.3 KiB
    assert one_shot(341 << 10, 4) and not one_shot(342 << 10, 4)
    # 8 ranks: 7·6/8 = 5.25·S more; S ≤ 512/5.25 = 97.5 KiB
    assert one_shot(97 << 10, 8) and not one_shot(98 << 10, 8)


@pytest.mark.parametrize(
    ("kind", "n", "world", "push", "span", "chunk", "slot", "half", "out"),
    [
        # all-reduce of 1000 elements on 3 ranks: tiles over all 1000; a slot is 1000 rounded up to 64 = 1024;
        # a push inbox holds a slot per source rank (3·1024), a pull stage only this rank's copy (1024)
        ("all-reduce", 1000, 3, True, 1000, 1000, 1024, 3 * 1024, 1000),
        ("all-reduce", 1000, 3, False, 1000, 1000, 1024, 1024, 1000),
        # all-gather of a 10001-element shard on 4 ranks: output 4·10001; slot 10048 (= 157·64)
        ("all-gather", 10001, 4, True, 10001, 10001, 10048, 4 * 10048, 40004),
        # reduce-scatter of 4·10001: each rank keeps a 10001-element chunk; pull stages every chunk in a slot
        ("reduce-scatter", 40004, 4, False, 10001, 10001, 10048, 4 * 10048, 10001),
        ("all-to-all", 40004, 4, True, 10001, 10001, 10048, 4 * 10048, 40004),
    ],
)
def test_layouts(kind, n, world, push, span, chunk, slot, half, out):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from pkroof.kernels import symm_collectives as c

    code = {"all-reduce": c.ALL_REDUCE, "all-gather": c.ALL_GATHER, "reduce-scatter": c.REDUCE_SCATTER,
            "all-to-all": c.ALL_TO_ALL}[kind]  # fmt: skip
    layout = c.Layout.of(code, n, world, push)
    assert (layout.span, layout.chunk, layout.slot, layout.half_size, layout.out_numel) == (
        span, chunk, slot, half, out
    )  # fmt: skip
    assert layout.slot % 64 == 0 and layout.half_size % 64 == 0  # 16-byte aligned slots for every rank


def test_layout_rejects_chunks_that_do_not_split():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from pkroof.kernels import symm_collectives as c

    with pytest.raises(ValueError, match="do not split over 4 ranks"):
        c.Layout.of(c.REDUCE_SCATTER, 10, 4, push=False)
    c.Layout.of(c.ALL_GATHER, 10, 4, push=False)  # a shard of any length gathers


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("kind", ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"])
def test_a_collective_on_padded_chunks_is_the_collective(kind, world):
    # exchange() runs chunks that are not a multiple of 16 elements on padded ones (16-byte accesses): pad every
    # rank's input, take the collective of the padded inputs by its definition (tests/emulate.py), unpad, and
    # it must equal the collective of the inputs themselves. 10001-element chunks pad to 10016.
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import torch
    from emulate import _expected

    from pkroof.kernels import symm_collectives as c

    code = {"all-reduce": c.ALL_REDUCE, "all-gather": c.ALL_GATHER, "reduce-scatter": c.REDUCE_SCATTER,
            "all-to-all": c.ALL_TO_ALL}[kind]  # fmt: skip
    n = 10001 * (world if kind in ("reduce-scatter", "all-to-all") else 1)
    g = torch.Generator().manual_seed(world)
    xs = [torch.randn(n, generator=g).to(torch.bfloat16) for _ in range(world)]
    padded = [c.pad_input(code, x, world) for x in xs]
    assert c.Layout.of(code, padded[0].numel(), world, True).chunk == 10016
    layout = c.Layout.of(code, n, world, True)
    for rank in range(world):
        got = c.unpad_output(code, _expected(kind, padded, rank), layout)
        assert torch.equal(got, _expected(kind, xs, rank)), rank


def test_tiling_spreads_tiles_and_keeps_16_byte_blocks(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from pkroof.kernels.symm_collectives import _tiling

    monkeypatch.setenv("PKROOF_MAX_BLOCK", "4096")
    # 64 MiB of bf16 (32 Mi elements) over 256 CTAs: 128 Ki elements per CTA; blocks of 4096 (the cap);
    # SUB = 131072 / (4·4096) = 8 blocks per hand-off, so each CTA still has 4 tiles to pipeline
    assert _tiling(32 << 20, 256) == (4096, 8)
    # with the cap at 16384 and 128 CTAs: 256 Ki elements per CTA, SUB = 262144 / (4·16384) = 4, again 4 tiles
    monkeypatch.setenv("PKROOF_MAX_BLOCK", "16384")
    assert _tiling(32 << 20, 128) == (16384, 4)
    # 256 KiB (128 Ki elements) over 256 CTAs: 512 per CTA, below the 1024-element floor: one block per tile
    assert _tiling(128 << 10, 256) == (1024, 1)


class Interpreter:
    """tests/interpreter_worker.py: one process with Triton's interpreter (chosen before triton compiles anything)
    that runs the emulation cases one by one; restarted after a case that fails or exceeds its limit."""

    CASE_LIMIT_S = 600  # one case: seconds of CPU on a busy machine, far above what any takes alone

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(Path(__file__).parent)}
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).parent / "interpreter_worker.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert json.loads(self._line(proc)) == {"ready": True}
        return proc

    def _line(self, proc: subprocess.Popen) -> str:
        ready, _, _ = select.select([proc.stdout], [], [], self.CASE_LIMIT_S)
        line = proc.stdout.readline() if ready else ""
        if not line:
            self.stop(proc)
            pytest.fail(f"the interpreter process gave no answer in {self.CASE_LIMIT_S} s (or died)")
        return line

    def run(self, module: str, function: str, kwargs: dict) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        self.proc.stdin.write(json.dumps({"module": module, "function": function, "kwargs": kwargs}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self._line(self.proc))
        assert answer["ok"], answer.get("error")

    def stop(self, proc: subprocess.Popen | None = None) -> None:
        proc = proc or self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc is self.proc:
            self.proc = None


@pytest.fixture(scope="module")
def interpreter():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    worker = Interpreter()
    yield worker
    worker.stop()


# the kernels themselves, on CPU: 1 (a one-rank group), 2, 3, 4 and 8 emulated ranks × the four collectives × pull /
# push / TMA push / split-role push, and the inter-SM GEMM + all-reduce (persistent GEMM, band counters, pushes, sums),
# at sizes that are not multiples of the block (nor, for all-reduce, of the world size; for TMA, with a tail of less
# than a row), three calls each (tests/emulate.py): 80 collective cases and 6 inter-SM ones, 3 ranks grouped by 2
EMULATED = emulate.cases()


@pytest.mark.parametrize(("function", "kwargs"), [c[1:] for c in EMULATED], ids=[c[0] for c in EMULATED])
def test_emulated_ranks_in_the_triton_interpreter(function, kwargs, interpreter):
    interpreter.run("emulate", function, kwargs)


# the LL all-reduce, all-gather, reduce-scatter and all-to-all (kernels/low_latency.py), phased: fp32, bf16, fp16 × 1,
# 2, 3, 4, 8 ranks × (5 elements per rank and peer: one masked tile, a padded word in every chunk of a half type; 20483
# over 2 CTAs: three tiles, two on CTA 0, the last partial), three calls each (both inbox parities), against each
# collective's definition; and the two-shot all-reduce as all_reduce_two_shot_ll composes it (an LL reduce-scatter of
# the padded input, an LL all-gather of the reduced chunks), bf16 on the same ranks and sizes (tests/emulate_ll.py)
LL = emulate_ll.cases()


@pytest.mark.parametrize(("function", "kwargs"), [c[1:] for c in LL], ids=[c[0] for c in LL])
def test_ll_collectives_in_the_triton_interpreter(function, kwargs, interpreter):
    interpreter.run("emulate_ll", function, kwargs)


def test_the_emulations_cover_every_case_they_name():
    assert len(EMULATED) == 4 * 5 * 4 + 6  # 4 collectives × 5 world sizes × (pull, push, TMA push, split push)
    assert len(LL) == 4 * 3 * 5 * 2 + 5 * 2  # 4 kinds × 3 dtypes × 5 world sizes × 2 cases; two-shot: 5 × 2
    assert len({c[0] for c in EMULATED + LL}) == len(EMULATED + LL)  # each its own test id


def test_ll_words_pad_half_types_to_whole_words():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import torch

    from pkroof.kernels import low_latency as ll

    # 5 bf16 elements are 10 bytes: 3 words of 4 bytes, the last half padding (zero, so a sum leaves it zero)
    w = ll.words_of(torch.arange(5, dtype=torch.bfloat16))
    assert w.dtype == torch.int32 and w.numel() == 3
    assert w.view(torch.bfloat16)[:5].tolist() == [0, 1, 2, 3, 4] and w.view(torch.bfloat16)[5].item() == 0
    assert ll.words_of(torch.ones(6, dtype=torch.float32)).numel() == 6  # fp32: a word each
    # about one tile per CTA, tiles of 256..4096 words: 256 KiB of bf16 is 65536 words, 512 for each of 128 CTAs;
    # 16 KiB (a decode all-reduce) is 4096 words, 16 tiles of the smallest block
    assert ll.tiling(65536, 128) == (512, 128, 128)
    assert ll.tiling(4096, 128) == (256, 16, 16)
    assert ll.ctas_used("all-reduce", torch.empty(8192, dtype=torch.bfloat16), 2) == 16
    assert ll.ctas_used("all-to-all", torch.empty(8192, dtype=torch.bfloat16), 2) == 8  # 2048 words per peer
    assert ll.inbox_lines(65) == 128
    # chunked inputs (reduce-scatter, all-to-all): each chunk padded to whole words on its own, so chunk p starts at
    # word p·n; 2 chunks of 3 bf16 elements are 2 words each, [0 1 | 2 _] [3 4 | 5 _]
    w = ll.words_of(torch.arange(6, dtype=torch.bfloat16), 2)
    assert w.numel() == 4 and w.view(torch.bfloat16).tolist() == [0, 1, 2, 0, 3, 4, 5, 0]
    # and back: an all-to-all's output slots drop their padding, an all-reduce keeps x's shape
    x = torch.arange(6, dtype=torch.bfloat16)
    assert ll.output_of("all-to-all", w, x, 2).tolist() == [0, 1, 2, 3, 4, 5]
    assert ll.output_of("all-to-all", w, x, 2).is_contiguous()  # padded slots: dropped by a copy, not a strided view
    assert ll.output_of("reduce-scatter", w, x, 2).tolist() == [0, 1, 2]
    assert ll.output_of("all-reduce", ll.words_of(x.view(2, 3)), x.view(2, 3), 2).shape == (2, 3)
    # strided inputs are read as what they hold, not as the memory under them (a review's find: fp32 views passed
    # straight to the kernel, which reads dense words)
    base = torch.arange(16, dtype=torch.float32)
    for x in (base[::2], base.view(4, 4)[:, :2], torch.arange(16, dtype=torch.bfloat16)[::2], base[:1].expand(4)):
        w = ll.words_of(x)
        assert w.is_contiguous() and w.data_ptr() % 16 == 0
        assert w.view(x.dtype).tolist() == x.reshape(-1).tolist()


def test_ll_collectives_refuse_what_they_cannot_do_in_one_line():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import torch

    from pkroof.kernels import low_latency as ll

    for kind, x, world, why in [
        ("reduce-scatter", torch.zeros(10, dtype=torch.bfloat16), 3, "do not split into 3 equal chunks"),
        ("all-gather", torch.zeros(4, dtype=torch.int32), 2, "not supported"),
        ("all-to-all", torch.empty(ll.MAX_BYTES // 2 + 2, dtype=torch.bfloat16), 2, "limit"),
        # 32 MiB of bf16 gathered on 8 ranks: 8 Mi words per peer, 2 parities × 8 slots × 8 Mi lines × 8 bytes = 1 GiB
        ("all-gather", torch.empty(16 << 20, dtype=torch.bfloat16), 8, "inbox would take 1024 MiB"),
    ]:
        with pytest.raises(ValueError, match=why):
            ll._checked(kind, x, world)


def test_shape_labels_say_what_was_set():
    p = load("all-reduce")
    assert p.shape_label(None, {}) == "small"
    assert p.shape_label(None, {"size_bytes": 64 << 20}) == "small size=64 MiB"
    assert p.shape_label("small", {"size_bytes": 1 << 20}) == "small"  # the shape's own value: nothing changed


def test_automatic_peers_need_gpus_and_triton(monkeypatch):
    import importlib.util

    from pkroof.profilers.profile import automatic_peers

    said = []
    assert automatic_peers("all-reduce", "gloo", said.append, 1 << 20) == []  # CPU ranks: no GPU implementation runs
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real_find_spec(name)
    )
    peers = automatic_peers("all-reduce", "nccl", said.append, 1 << 20)
    # NCCL in place and torch's own fast paths still run; pkroof's kernels are skipped with one line, not recorded
    # as crashes
    assert peers == ["nccl-all-reduce-in-place", "torch-symm-mem-one-shot", "torch-symm-mem-two-shot"]
    assert len(said) == 1 and "triton is not installed" in said[0] and "pkroof-one-shot-push" in said[0]


def test_across_nodes_only_what_spans_nodes_runs_unasked():
    from pkroof.profilers.profile import automatic_peers

    # symmetric memory and pkroof's kernels map peers' memory over NVLink: one node only. NCCL in place spans nodes.
    said = []
    peers = automatic_peers("all-reduce", "nccl", said.append, 1 << 20, nodes=2)
    assert peers == ["nccl-all-reduce-in-place"]
    assert len(said) == 1 and "on 2 nodes" in said[0] and "torch-symm-mem-one-shot" in said[0]


def test_small_message_kernels_run_unasked_only_at_small_sizes():
    from pkroof.profilers.profile import automatic_peers

    # the LL all-reduce runs beside the reference up to 1 MiB (its auto_max_bytes) and only when named above it:
    # its inbox holds 4x the message per peer, and the flag hand-off wins on bytes
    assert "pkroof-one-shot-ll" in automatic_peers("all-reduce", "nccl", print, 256 << 10)
    assert "pkroof-one-shot-ll" in automatic_peers("all-reduce", "nccl", print, 1 << 20)
    big = automatic_peers("all-reduce", "nccl", print, (1 << 20) + 2)
    assert "pkroof-one-shot-ll" not in big and "pkroof-one-shot-push" in big
    assert "pkroof-gemv-ar-ll" in automatic_peers("decode-gemv-all-reduce", "nccl", print, 16 << 10)


def test_profile_runs_the_small_message_kernels_unasked_only_at_their_sizes(tmp_path, monkeypatch):
    # profile() as on a 2-GPU node, with the rank jobs stubbed out: which implementations it runs beside the reference
    # follows the problem's communication size (all-reduce: the buffer's bytes, nccl-tests' convention)
    pytest.importorskip("torch")
    pytest.importorskip("triton")  # without it pkroof's kernels are skipped altogether
    from pkroof.profilers import profile as prof

    ran = []

    def stub(job, timeout_s):
        ran.append((job.params["size_bytes"], job.impl))
        return {"problem": job.problem, "shape": job.shape, "params": job.params, "impl": job.impl,
                "world_size": job.world_size, "status": "incorrect", "message": "stub"}  # fmt: skip

    monkeypatch.setattr(prof, "devices", lambda: 2)
    monkeypatch.setattr(prof, "run_job", stub)
    written = {}
    for size in (256 << 10, 64 << 20):
        written[size] = prof.profile(["all-reduce"], impls=["reference"], world_size=2, shape=None,
                                     overrides={"size_bytes": size}, out_dir=tmp_path / str(size), timeout_s=5,
                                     resume=False, topology="h200x2", log=lambda _: None)  # fmt: skip
    small = {impl for size, impl in ran if size == 256 << 10}
    large = {impl for size, impl in ran if size == 64 << 20}
    assert {"reference", "pkroof-one-shot-ll", "pkroof-one-shot-push", "nccl-all-reduce-in-place"} <= small
    assert "pkroof-one-shot-ll" not in large and {"reference", "pkroof-one-shot-push"} <= large
    # the LL kernel's record says its protocol and its CTAs; read, it gets the model's LL prediction at them
    from pkroof.analysis.catalogue import load
    from pkroof.analysis.problem import workload_of
    from pkroof.records.evaluate import evaluate
    from pkroof.rooflines import Mechanism, Protocol, Schedule, predict
    from pkroof.topology import resolve

    by_impl = {r["impl"]: r for r in written[256 << 10]}
    ll, push = by_impl["pkroof-one-shot-ll"], by_impl["pkroof-one-shot-push"]
    assert ll["protocol"] == "ll" and "protocol" not in push
    assert ll["algorithm"] == push["algorithm"] == "one-shot"
    assert "predicted_s" not in ll  # records hold measurements only
    read = {r["impl"]: r for r in evaluate(written[256 << 10], resolve("h200x2"), log=lambda _: None).records}
    w = workload_of(load("all-reduce"), 2, {"size_bytes": 256 << 10})
    system = resolve("h200x2").system(2)
    expected = predict(w, system, Mechanism.SM_STORE, Schedule.SERIAL, ll["comm_sms"], Protocol.LL).t_s
    assert read["pkroof-one-shot-ll"]["predicted_s"] == pytest.approx(expected)
    assert read["pkroof-one-shot-ll"]["predicted_s"] != pytest.approx(
        predict(w, system, Mechanism.SM_STORE, Schedule.SERIAL, 128).t_s
    )
