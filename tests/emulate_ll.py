"""The LL collectives (kernels/low_latency.py) with N ranks emulated in one process.

Two ways:
- phased (CPU through Triton's interpreter, or a GPU): every rank sends, then every rank receives, for three calls
  in a row (both parity halves); checks the indexing, the packing of each dtype and the padding;
- concurrent (GPU only): every rank's kernel on a stream of its own, all resident at once, many calls queued with
  no host synchronisation between them, so receivers really poll lines that their senders are still writing and
  a fast rank's next call really races its peers' reads of the last one. Each rank takes few CTAs, so that
  every rank's kernel fits on the GPU beside the others (a rank whose kernel could not start would leave its
  peers polling until MAX_POLLS, and the outputs wrong).

Expected values, by each collective's definition: the all-reduce, each rank's input in fp32, summed, rounded once to
the dtype (the kernel sums in rank order in fp32), and every rank's output bit-identical to rank 0's; the
reduce-scatter, rank r's the same of every rank's chunk r; the all-gather every rank's input after another, and the
all-to-all rank r's chunk of every rank after another, both exactly.

    python tests/emulate_ll.py             # the phased cases on CPU, in the interpreter; exits 1 on the first mismatch
    python tests/emulate_ll.py --one-rank  # the host path (workspace, padding, graphs) on a 1-rank NCCL group, GPU 0
"""

from __future__ import annotations

import os
import sys

KINDS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]
DTYPES = ["float32", "bfloat16", "float16"]
WORLDS = [1, 2, 3, 4, 8]
# (elements per rank and peer, CTAs): 5 elements (one masked tile, an odd count of half-type elements: a padded
# word); 20483 over 2 CTAs (bf16: 10242 words in three 4096-word tiles, so CTA 0 takes two and the last is partial).
# The reduce-scatter and all-to-all inputs hold a chunk of that many elements per rank.
CASES = [(5, 4), (5 * 4096 + 3, 2)]
TOLERANCE = {"float32": (1e-5, 1e-5), "bfloat16": (1.6e-2, 1e-2), "float16": (2e-3, 2e-3)}  # (rtol, atol)


class Ranks:
    """Every emulated rank's zeroed inbox, counters and the table of inbox addresses, for one message size."""

    def __init__(self, world: int, n_words: int, device: str):
        import torch

        from pkroof.kernels import low_latency as ll
        from pkroof.kernels.symm import MAX_CTAS

        lines = ll.inbox_lines(n_words)
        self.inboxes = [torch.zeros(2 * world * lines, dtype=torch.int64, device=device) for _ in range(world)]
        self.table = torch.tensor([b.data_ptr() for b in self.inboxes], dtype=torch.int64, device=device)
        self.calls = [torch.zeros(MAX_CTAS, dtype=torch.int32, device=device) for _ in range(world)]


def expected(kind: str, xs: list) -> list:
    """Every rank's output of `kind` for inputs xs (one per rank), by the collective's definition."""
    import torch

    world = len(xs)
    chunks = [x.reshape(world, -1) for x in xs] if kind in ("reduce-scatter", "all-to-all") else []
    match kind:
        case "all-reduce":
            return [torch.stack(xs).float().sum(0).to(xs[0].dtype)] * world
        case "all-gather":
            return [torch.cat([x.reshape(-1) for x in xs])] * world
        case "reduce-scatter":
            return [torch.stack([c[r] for c in chunks]).float().sum(0).to(xs[0].dtype) for r in range(world)]
        case "all-to-all":
            return [torch.cat([c[r] for c in chunks]) for r in range(world)]
    raise AssertionError(kind)


def _check(kind: str, xs, outs, dtype_name: str, what: str) -> None:
    import torch

    rtol, atol = TOLERANCE[dtype_name] if kind in ("all-reduce", "reduce-scatter") else (0.0, 0.0)
    for r, (out, want) in enumerate(zip(outs, expected(kind, xs), strict=True)):
        assert out.shape == want.shape, f"{what}, rank {r}: shape {tuple(out.shape)}, want {tuple(want.shape)}"
        bad = ~torch.isclose(out.float(), want.float(), rtol=rtol, atol=atol)
        where = bad.nonzero().flatten()[:8].tolist()
        assert not bad.any(), (
            f"{what}, rank {r}: {int(bad.sum())} of {bad.numel()} wrong, first at {where}: "
            f"got {out.reshape(-1)[where].tolist()}, want {want.reshape(-1)[where].tolist()}"
        )
        if kind == "all-reduce":
            assert torch.equal(out.view(-1).view(torch.int8), outs[0].view(-1).view(torch.int8)), (
                f"{what}: rank {r}'s output differs from rank 0's"
            )


def _inputs(kind: str, world: int, n: int, dtype_name: str, calls: int, device: str):
    """`calls` sets of every rank's input: n elements, or a chunk of n per rank (reduce-scatter, all-to-all)."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(world * 1000 + n)
    dtype = getattr(torch, dtype_name)
    numel = n * world if kind in ("reduce-scatter", "all-to-all") else n
    return [[torch.randn(numel, generator=g).to(dtype).to(device) for _ in range(world)] for _ in range(calls)]


class Call:
    """One call's every rank: input words, output words (0xFFFFFFFF: NaN in every dtype, so unwritten fails)."""

    def __init__(self, kind: str, xs: list):
        import torch

        from pkroof.kernels import low_latency as ll

        self.kind, self.xs, world = kind, xs, len(xs)
        chunked, reduce = ll.KINDS[kind]
        self.words = [ll.words_of(x, world if chunked else 1) for x in xs]
        self.n_words = self.words[0].numel() // (world if chunked else 1)
        self.outs = [torch.full((self.n_words * (1 if reduce else world),), -1, dtype=torch.int32,
                                device=x.device) for x in xs]  # fmt: skip

    def results(self) -> list:
        from pkroof.kernels import low_latency as ll

        return [ll.output_of(self.kind, o, x, len(self.xs)) for o, x in zip(self.outs, self.xs, strict=True)]


def _phased(call: Call, ranks: Ranks, ctas: int) -> list:
    """One call of every rank, phased: every rank's send, then every rank's receive; every rank's result."""
    from pkroof.kernels import low_latency as ll

    world = len(call.xs)
    for phase in (1, 2):
        for r in range(world):
            ll.launch(call.kind, call.words[r], call.outs[r], ranks.table, ranks.calls[r], r, world, call.xs[r].dtype,
                      ctas=ctas, phase=phase)  # fmt: skip
    return call.results()


def emulate_phased(kind: str, world: int, n: int, dtype_name: str, ctas: int, device: str, calls: int = 3) -> None:
    """`calls` consecutive calls, fresh inputs each, every rank's send then every rank's receive."""
    for c, xs in enumerate(_inputs(kind, world, n, dtype_name, calls, device)):
        call = Call(kind, xs)
        if c == 0:
            ranks = Ranks(world, call.n_words, device)
        _check(kind, xs, _phased(call, ranks, ctas), dtype_name,
               f"LL {kind} {dtype_name} phased, {world} ranks, {n} elements, call {c}")  # fmt: skip


def emulate_two_shot(world: int, n: int, dtype_name: str, ctas: int, device: str, calls: int = 3) -> None:
    """The two-shot LL all-reduce as all_reduce_two_shot_ll composes it (its padding, an LL reduce-scatter, an LL
    all-gather of the reduced chunks, the padding dropped), phased, checked as an all-reduce."""
    from pkroof.kernels import low_latency as ll

    for c, xs in enumerate(_inputs("all-reduce", world, n, dtype_name, calls, device)):
        scatter = Call("reduce-scatter", [ll.padded_for_two_shot(x, world) for x in xs])
        if c == 0:
            ranks = {kind: Ranks(world, scatter.n_words, device) for kind in ("reduce-scatter", "all-gather")}
        gather = Call("all-gather", _phased(scatter, ranks["reduce-scatter"], ctas))
        outs = [full[:n].view_as(x) for full, x in zip(_phased(gather, ranks["all-gather"], ctas), xs, strict=True)]
        _check("all-reduce", xs, outs, dtype_name,
               f"LL two-shot all-reduce {dtype_name} phased, {world} ranks, {n} elements, call {c}")  # fmt: skip


def emulate_concurrent(
    kind: str, world: int, n: int, dtype_name: str, ctas: int, calls: int = 40, graph: bool = False
) -> None:
    """Every rank on its own stream, `calls` calls queued back to back on each, checked; with graph, then also
    captured once per rank in a CUDA graph (the counters advance on the device) and replayed twice, checked."""
    import torch

    from pkroof.kernels import low_latency as ll

    per_call = [Call(kind, xs) for xs in _inputs(kind, world, n, dtype_name, calls, "cuda")]
    ranks = Ranks(world, per_call[0].n_words, "cuda")
    streams = [torch.cuda.Stream() for _ in range(world)]

    def run_rank(r: int) -> None:
        for call in per_call:
            ll.launch(kind, call.words[r], call.outs[r], ranks.table, ranks.calls[r], r, world, call.xs[r].dtype,
                      ctas=ctas)  # fmt: skip

    def check(what: str) -> None:
        torch.cuda.synchronize()
        for c, call in enumerate(per_call):
            _check(kind, call.xs, call.results(), dtype_name,
                   f"LL {kind} {dtype_name} {what}, {world} ranks, {n} elements, call {c}")  # fmt: skip
        for o in (o for call in per_call for o in call.outs):
            o.fill_(-1)
        torch.cuda.synchronize()

    torch.cuda.synchronize()
    for r in range(world):  # each stream gets its whole queue; the ranks' kernels then run side by side
        with torch.cuda.stream(streams[r]):
            run_rank(r)
    check("concurrent")
    rounds = 1
    if graph:
        graphs = [torch.cuda.CUDAGraph() for _ in range(world)]
        for r in range(world):
            with torch.cuda.graph(graphs[r], stream=streams[r]):
                run_rank(r)
        for replay in range(2):
            for r in range(world):
                with torch.cuda.stream(streams[r]):
                    graphs[r].replay()
            check(f"concurrent graph replay {replay}")
        rounds += 2
    got = [int(ranks.calls[r][0]) for r in range(world)]
    assert got == [calls * rounds] * world, f"call counters {got}, want {calls * rounds} on every rank"


def one_rank_group() -> None:
    """The implementations as the profiler calls them, on a real 1-rank NCCL group with symmetric memory: the sum
    of one rank is its input, exactly in every dtype (fp32 sums of one term round back to themselves)."""
    import socket

    from pkroof.runtime.launch import keep_multicast_off

    keep_multicast_off()
    import torch
    import torch.distributed as dist

    from pkroof.kernels import low_latency as ll
    from pkroof.kernels.declare import reported_comm_sms

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    g = torch.Generator(device="cuda").manual_seed(0)
    for n, dtype in [(5, torch.bfloat16), (128 << 10, torch.bfloat16), (20483, torch.float16), (1000, torch.float32)]:
        for x in [torch.randn(n, generator=g, device="cuda").to(dtype) for _ in range(3)]:
            y = ll.all_reduce_one_shot_ll(x)
            assert torch.equal(y, x) and y.data_ptr() != x.data_ptr(), (n, dtype)
        shifted = torch.randn(n + 1, generator=g, device="cuda").to(dtype)[1:]  # not 16-byte aligned: copied
        assert torch.equal(ll.all_reduce_one_shot_ll(shifted), shifted), (n, dtype, "shifted")
        assert torch.equal(ll.all_reduce_two_shot_ll(shifted), shifted), (n, dtype, "two-shot")
        for fn in (ll.all_gather_ll, ll.reduce_scatter_ll, ll.all_to_all_ll):  # of one rank: its input, 1-D
            for x in (shifted, torch.randn(n, generator=g, device="cuda").to(dtype)):
                assert torch.equal(fn(x), x.reshape(-1)), (fn, n, dtype)
    static = torch.randn(128 << 10, generator=g, device="cuda").to(torch.bfloat16)
    ll.all_reduce_one_shot_ll(static)  # allocation and rendezvous are eager; then the calls capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = ll.all_reduce_one_shot_ll(static)
    for _ in range(3):  # replays count on the device: parity and flags move on
        static.copy_(torch.randn(static.numel(), generator=g, device="cuda").to(torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, static), "graph replay"
    a = torch.randn(64, 256, generator=g, device="cuda").to(torch.bfloat16)
    b = torch.randn(256, 128, generator=g, device="cuda").to(torch.bfloat16)
    for fn in (ll.gemm_reduce_scatter_ll, ll.all_gather_gemm_ll, ll.gemm_all_reduce_ll):  # one rank: A·B, its shape
        assert torch.equal(fn(a, b), a @ b), fn
    x = torch.randn(8, 512, generator=g, device="cuda").to(torch.bfloat16)
    w = torch.randn(1024, 512, generator=g, device="cuda").to(torch.bfloat16)
    assert torch.equal(ll.gemv_all_reduce_ll(x, w), torch.nn.functional.linear(x, w))
    # 8 x 1024 bf16 outputs are 4096 words: 16 tiles of 256, so 16 CTAs, not the declared 128
    assert reported_comm_sms(ll.gemv_all_reduce_ll) == 16
    for bad, why in [(torch.zeros(4, dtype=torch.int32, device="cuda"), "not supported"),
                     (torch.empty((ll.MAX_BYTES // 2) + 1, dtype=torch.bfloat16, device="cuda"), "limit")]:  # fmt: skip
        try:
            ll.all_reduce(bad)
        except ValueError as e:
            assert why in str(e), e
        else:
            raise AssertionError(f"no ValueError for {bad.dtype} x {bad.numel()}")
    dist.destroy_process_group()
    print("one-rank group ok")


def cases() -> list[tuple[str, str, dict]]:
    """Every CPU case: (its name, the function here that runs it, its keyword arguments)."""
    out = []
    for kind in KINDS:
        for dtype_name in DTYPES:
            for world in WORLDS:
                for n, ctas in CASES:
                    kw = dict(kind=kind, world=world, n=n, dtype_name=dtype_name, ctas=ctas)
                    out.append((f"ll-{kind}-{dtype_name}-{world}-n{n}", "emulate_phased", kw))
    for world in WORLDS:  # bf16 (half types pack two to a word: the chunks' padding matters)
        for n, ctas in CASES:
            kw = dict(world=world, n=n, dtype_name="bfloat16", ctas=ctas)
            out.append((f"ll-two-shot-bfloat16-{world}-n{n}", "emulate_two_shot", kw))
    return out


def run_case(function: str, kwargs: dict) -> None:
    """One case of cases() on CPU (the interpreter chosen already: emulate.interpreter_setup())."""
    globals()[function](device="cpu", **kwargs)


def main() -> int:
    if "--one-rank" in sys.argv:
        one_rank_group()
        return 0
    sys.path.insert(0, os.path.dirname(__file__))
    from emulate import interpreter_setup

    interpreter_setup()
    for _, function, kwargs in cases():
        run_case(function, kwargs)
    print(f"{len(cases())} LL cases ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
