"""The tracer on references nobody wrote a cost model for: every rank, every byte read, every FLOP or its name, the
rate an op runs at, uneven collectives' own bytes, and latency along the data flow. Each expected value is derived
here from the shape; the latency cases compare an independent and a chained version of the same ops."""

import json
import math
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from pkroof.analysis.catalogue import load  # noqa: E402
from pkroof.analysis.trace import trace, trace_on_meta  # noqa: E402
from pkroof.cli import app  # noqa: E402
from pkroof.rooflines import Collective, bound  # noqa: E402
from pkroof.topology import resolve  # noqa: E402

HEAD = "import torch\nimport torch.distributed as dist\nimport torch.nn.functional as F\n\n"
DRAW = (
    "    g = None if torch.device(device).type == 'meta' else torch.Generator(device=device).manual_seed(seed + rank)\n"
)


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("PKROOF_TRACE_CACHE", str(tmp_path / "cache"))


def _file(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + body)
    return load(str(path))


def _json(*args):
    done = CliRunner().invoke(app, ["bound", *args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_the_busiest_rank_sets_each_term_and_is_named(tmp_path):
    # causal ring attention as picotron does it: rank r attends to r + 1 blocks of s keys, so rank W − 1 does W
    # blocks: QKᵀ and PV are 2·s·s·d FLOPs each per block
    p = _file(
        tmp_path,
        "causal",
        "def inputs(rank, world_size, *, seed, device, s=64, d=32):\n"
        + DRAW
        + "    return tuple(torch.randn(s, d, generator=g, device=device) for _ in range(3))\n\n"
        "def reference(q, k, v):\n"
        "    rank, world = dist.get_rank(), dist.get_world_size()\n"
        "    out = torch.zeros_like(q)\n"
        "    for step in range(rank + 1):\n"
        "        out = out + (q @ k.t()).softmax(-1) @ v\n"
        "    return out\n",
    )
    s, d, world = 64, 32, 4
    w = trace_on_meta(p, world, p.params())
    per_rank = [sum(op.flops for op in v.compute) for v in w.views()]
    assert sorted(per_rank) == [(r + 1) * 2 * (2 * s * s * d) for r in range(world)]
    b = bound(w, resolve("hgx-h100-8").system(world))
    assert b.busiest_rank["compute"] == world - 1 and b.flops == world * 2 * (2 * s * s * d)
    out = _json(str(p.path), "-t", "hgx-h100-8", "-n", str(world))
    assert out["busiest_rank"]["compute"] == world - 1 and out["flops"] == world * 2 * 2 * s * s * d


def test_module_weights_count_as_bytes_read_and_decide_the_dtype(tmp_path):
    # a bf16 nn.Linear(1024 → 512) with bias applied to 8 fp32 tokens: the weights' 2·(512·1024 + 512) B hold most of
    # the bytes, so the problem is bf16; read: x (8·1024·4 B) and the weights; written: y, 8·512 bf16
    p = _file(
        tmp_path,
        "linear",
        "def inputs(rank, world_size, *, seed, device, tokens=8, n_in=1024, n_out=512):\n"
        "    layer = torch.nn.Linear(n_in, n_out, device=device, dtype=torch.bfloat16)\n"
        "    return torch.ones(tokens, n_in, device=device), layer\n\n"
        "def reference(x, layer):\n"
        "    y = layer(x.to(torch.bfloat16))\n"
        "    dist.all_reduce(y)\n"
        "    return y\n",
    )
    w = trace_on_meta(p, 2, p.params())
    assert w.dtype == "bf16"
    # the cast x.to(bf16) is made here: its 8·1024·2 B are not read from HBM, x's are
    assert w.hbm_bytes == 8 * 1024 * 4 + 2 * (512 * 1024 + 512) + 8 * 512 * 2
    assert w.flops_by_dtype == {"bf16": 2 * 8 * 1024 * 512}


def test_a_captured_tensor_is_read_too(tmp_path):
    p = _file(
        tmp_path,
        "closure",
        "TABLE = torch.ones(256, 64, device='meta')\n\n"
        "def inputs(rank, world_size, *, seed, device, n=256):\n    return (torch.ones(n, device=device),)\n\n"
        "def reference(x):\n    out = (TABLE * x[:, None]).sum(0)\n    dist.all_reduce(out)\n    return out\n",
    )
    w = trace_on_meta(p, 2, p.params())
    # read: x (256·4 B) and the captured table (256·64·4 B); written: out (64·4 B)
    assert w.hbm_bytes == 256 * 4 + 256 * 64 * 4 + 64 * 4


def test_ffts_are_counted_and_ops_without_a_formula_are_named(tmp_path):
    # a complex FFT of n = 1024 points per row, 8 rows: 5·n·log2 n each; an rFFT of the same rows: 2.5·n·log2 n;
    # a linear solve has no FLOP formula in torch: named, not counted as zero silently
    p = _file(
        tmp_path,
        "spectral",
        "def inputs(rank, world_size, *, seed, device, rows=8, n=1024):\n"
        "    return torch.ones(rows, n, device=device), torch.eye(16, device=device)\n\n"
        "def reference(x, a):\n"
        "    c = torch.fft.fft(x.to(torch.complex64))\n"
        "    r = torch.fft.rfft(x)\n"
        "    s = torch.linalg.solve(a, a)\n"
        "    out = c.real.sum(-1) + r.real.sum(-1) + s.sum()\n"
        "    dist.all_reduce(out)\n"
        "    return out\n",
    )
    w = trace_on_meta(p, 2, p.params())
    n, rows = 1024, 8
    assert sum(op.flops for op in w.compute) == pytest.approx(rows * (5 + 2.5) * n * math.log2(n))
    assert any("linalg" in name for name in w.uncounted)
    out = _json(str(p.path), "-t", "h200x2")
    assert any("linalg" in name for name in out["uncounted"])


def test_fp32_convolutions_are_charged_at_tf32_as_torch_runs_them(tmp_path):
    # torch's default lets cuDNN run fp32 convolutions on TF32 tensor cores, and keeps fp32 matmuls in full fp32;
    # a reference that switches TF32 off for its convolution is charged fp32
    body = (
        "def inputs(rank, world_size, *, seed, device, c=16, hw=32):\n"
        "    return torch.ones(1, c, hw, hw, device=device), torch.ones(c, c, 3, 3, device=device)\n\n"
        "def reference(x, w):\n"
        "    {switch}y = F.conv2d(x, w, padding=1)\n"
        "    z = y.flatten(1) @ y.flatten(1).t()\n"
        "    dist.all_reduce(z)\n"
        "    return z\n"
    )
    c, hw = 16, 32
    conv, mm = 2 * (c * hw * hw) * c * 9, 2 * 1 * (c * hw * hw) * 1
    default = trace_on_meta(_file(tmp_path, "tf32", body.format(switch="")), 2, {"c": c, "hw": hw})
    assert default.flops_by_dtype == {"tf32": conv, "fp32": mm}
    before = torch.backends.cudnn.allow_tf32
    try:
        strict = trace_on_meta(
            _file(tmp_path, "ieee", body.format(switch="torch.backends.cudnn.allow_tf32 = False\n    ")), 2, {}
        )
    finally:
        torch.backends.cudnn.allow_tf32 = before
    assert strict.flops_by_dtype == {"fp32": conv + mm}


def test_uneven_all_to_all_is_charged_its_real_bytes(tmp_path):
    # 2 ranks; rank 0 sends 3 of its 4 rows to rank 1 and keeps 1, rank 1 sends 1 of its rows and keeps 3; rows are
    # 128 bf16: rank 0 sends 3·256 B and receives 1·256 B; the busiest direction on either rank is 3·256 B, where
    # an even all-to-all of 4 rows would put (n−1)/n·4·256 = 2·256 B on the link
    p = _file(
        tmp_path,
        "a2av",
        "def inputs(rank, world_size, *, seed, device, rows=4, width=128):\n"
        "    return (torch.ones(rows, width, device=device, dtype=torch.bfloat16),)\n\n"
        "def reference(x):\n"
        "    rank = dist.get_rank()\n"
        "    send = [1, 3] if rank == 0 else [1, 3]\n"
        "    recv = [1, 1] if rank == 0 else [3, 3]\n"
        "    out = x.new_empty(sum(recv), x.shape[1])\n"
        "    dist.all_to_all_single(out, x, recv, send)\n"
        "    return out\n",
    )
    w = trace_on_meta(p, 2, p.params())
    ops = {r: v.comm[0] for v, rs in zip(w.views(), w.view_ranks(), strict=True) for r in rs}
    assert (ops[0].send_bytes, ops[0].recv_bytes) == (3 * 256, 1 * 256)
    assert (ops[1].send_bytes, ops[1].recv_bytes) == (1 * 256, 3 * 256)
    assert bound(w, resolve("h200x2").system(2)).link_bytes_per_rank == 3 * 256


def _latency(tmp_path, name: str, reference: str, world: int = 2, *, how=trace_on_meta) -> float:
    p = _file(
        tmp_path,
        name,
        "def inputs(rank, world_size, *, seed, device, n=1024):\n"
        "    return tuple(torch.ones(n, device=device) for _ in range(3))\n\n" + reference,
    )
    return bound(how(p, world, p.params()), resolve("h200x2").system(world)).t_latency_s


def test_independent_collectives_overlap_and_dependent_ones_chain(tmp_path):
    one = _latency(
        tmp_path, "one", "def reference(a, b, c):\n    a = a.clone()\n    dist.broadcast(a, 0)\n    return a\n"
    )
    independent = _latency(
        tmp_path,
        "independent",
        "def reference(a, b, c):\n"
        "    a, b, c = a.clone(), b.clone(), c.clone()\n"
        "    for t in (a, b, c):\n        dist.broadcast(t, 0)\n"
        "    return a, b, c\n",
    )
    chained = _latency(
        tmp_path,
        "chained",
        "def reference(a, b, c):\n"
        "    a = a.clone()\n    dist.broadcast(a, 0)\n"
        "    b = b + a\n    dist.broadcast(b, 0)\n"
        "    c = c + b\n    dist.broadcast(c, 0)\n"
        "    return a, b, c\n",
    )
    # three broadcasts of independent tensors wait on nothing but their own data: the latency of one; each of three
    # that broadcasts what the one before delivered waits for it: three in a row
    assert independent == pytest.approx(one) and chained == pytest.approx(3 * one)


def test_point_to_point_issued_together_is_one_step(tmp_path):
    together = _latency(
        tmp_path,
        "together",
        "def reference(a, b, c):\n"
        "    rank = dist.get_rank(); peer = 1 - rank\n"
        "    ra, rb = torch.empty_like(a), torch.empty_like(b)\n"
        "    ops = [dist.P2POp(dist.isend, a, peer), dist.P2POp(dist.isend, b, peer),\n"
        "           dist.P2POp(dist.irecv, ra, peer), dist.P2POp(dist.irecv, rb, peer)]\n"
        "    for r in dist.batch_isend_irecv(ops):\n        r.wait()\n"
        "    return ra + rb\n",
    )
    relayed = _latency(
        tmp_path,
        "relayed",
        "def reference(a, b, c):\n"
        "    rank = dist.get_rank(); peer = 1 - rank\n"
        "    ra, rb = torch.empty_like(a), torch.empty_like(b)\n"
        "    for r in dist.batch_isend_irecv([dist.P2POp(dist.isend, a, peer), dist.P2POp(dist.irecv, ra, peer)]):\n"
        "        r.wait()\n"
        "    x = ra * 2\n"
        "    for r in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer), dist.P2POp(dist.irecv, rb, peer)]):\n"
        "        r.wait()\n"
        "    return rb\n",
    )
    # two sends issued in one batch travel together: one step; a send of what the first exchange delivered waits
    # for it: two steps
    assert relayed == pytest.approx(2 * together)


def test_inputs_that_make_process_groups_or_need_values_trace(tmp_path):
    grouped = _file(
        tmp_path,
        "grouped",
        "def inputs(rank, world_size, *, seed, device, n=64):\n"
        "    return torch.ones(n, device=device), dist.new_group(list(range(world_size)))\n\n"
        "def reference(x, group):\n    out = x.clone()\n    dist.all_reduce(out, group=group)\n    return out\n",
    )
    w = trace_on_meta(grouped, 4, grouped.params())
    assert [(op.kind, op.size_bytes, op.group_size) for op in w.comm] == [(Collective.ALL_REDUCE, 64 * 4, 4)]
    valued = _file(
        tmp_path,
        "valued",
        "def inputs(rank, world_size, *, seed, device, n=64):\n"
        "    rows = int(torch.tensor([3, 5]).sum().item())  # a value: no meta kernel can give it\n"
        "    return (torch.ones(rows, n, device=device),)\n\n"
        "def reference(x):\n    out = x.clone()\n    dist.all_reduce(out)\n    return out\n",
    )
    w = trace_on_meta(valued, 2, valued.params())
    assert w.comm[0].size_bytes == 8 * 64 * 4  # drawn on the CPU, moved to meta


def test_gloo_does_not_decide_what_nccl_would_run(tmp_path):
    # an all-gather of unequal tensors (rank r holds r + 1 rows of 16 fp32) that needs values to trace: on CPU ranks
    # gloo refuses unequal lists; pkroof runs it padded and records the real bytes: rank 0 receives 2·64 B and
    # sends its 64 B to the other rank, rank 1 receives 64 B and sends 2·64 B
    p = _file(
        tmp_path,
        "gatherv",
        "def inputs(rank, world_size, *, seed, device, width=16):\n"
        "    return (torch.full((rank + 1, width), float(rank), device=device),)\n\n"
        "def reference(x):\n"
        "    world = dist.get_world_size()\n"
        "    sizes = [x.new_zeros(1) for _ in range(world)]\n"
        "    dist.all_gather(sizes, x.new_full((1,), float(x.shape[0])))\n"
        "    rows = [int(s.item()) for s in sizes]  # values: no meta tensor has them, so CPU ranks trace it\n"
        "    out = [x.new_empty(r, x.shape[1]) for r in rows]\n"
        "    dist.all_gather(out, x)\n"
        "    return torch.cat(out)\n",
    )
    with pytest.raises(RuntimeError):  # on meta tensors it cannot be traced
        trace_on_meta(p, 2, p.params())
    w = trace(p, 2, p.params())
    ops = {r: v.comm[1] for v, rs in zip(w.views(), w.view_ranks(), strict=True) for r in rs}  # [0]: the sizes
    assert (ops[0].send_bytes, ops[0].recv_bytes) == (64, 128)
    assert (ops[1].send_bytes, ops[1].recv_bytes) == (128, 64)


# `pkroof bound FILE --json` in a fresh process where starting a process fails (fork, exec, spawn, subprocess and
# multiprocessing, the fork server's start included) and that says whether torch was imported
BOUND_WITHOUT_PROCESSES = """
import json, multiprocessing.process, sys
STARTS = {"os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.system", "os.exec", "subprocess.Popen",
          "multiprocessing.Process.start"}
def refuse(event, args=()):
    if event in STARTS:
        print(f"a process was started: {event}", file=sys.stderr)  # said here too: a caller may hide the error
        raise AssertionError(f"a process was started: {event}")
sys.addaudithook(refuse)
multiprocessing.process.BaseProcess.start = lambda self: refuse("multiprocessing.Process.start")
from typer.testing import CliRunner
from pkroof.cli import app
done = CliRunner().invoke(app, ["bound", sys.argv[1], "-t", "h200x2", "--json"])
assert done.exit_code == 0, (done.output, repr(done.exception))
print(json.dumps({"torch_imported": "torch" in sys.modules, "bound": json.loads(done.stdout)}))
"""


def test_a_second_bound_reads_the_trace_from_the_cache(tmp_path):
    path = tmp_path / "cached.py"
    marker = tmp_path / "imported"
    path.write_text(
        HEAD + f"open({str(marker)!r}, 'a').write('x')\n\n"
        "def inputs(rank, world_size, *, seed, device, n=4096):\n    return (torch.ones(n, device=device),)\n\n"
        "def reference(x):\n    out = x * 2\n    dist.all_reduce(out)\n    return out\n"
    )
    first = _json(str(path), "-t", "h200x2")
    assert marker.read_text() == "x"  # traced: the file ran once
    command = [sys.executable, "-c", BOUND_WITHOUT_PROCESSES, str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)  # a harness limit, not a time asserted
    assert done.returncode == 0, done.stderr
    again = json.loads(done.stdout)
    # from the cache, in the calling process: no process started, torch never imported, the file did not run again
    assert again == {"torch_imported": False, "bound": first} and marker.read_text() == "x"
    path.write_text(path.read_text().replace("n=4096", "n=8192"))  # other bytes: another entry
    assert _json(str(path), "-t", "h200x2")["comm"][0]["size_bytes"] == 8192 * 4


def test_a_corrupted_cache_entry_is_traced_again(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(
        HEAD + "def inputs(rank, world_size, *, seed, device, n=64):\n    return (torch.ones(n, device=device),)\n\n"
        "def reference(x):\n    out = x.clone()\n    dist.all_reduce(out)\n    return out\n"
    )
    first = _json(str(path), "-t", "h200x2")
    for entry in (tmp_path / "cache").glob("*.json"):
        entry.write_text('{"name": "p", "compute": "not a list"}')
    assert _json(str(path), "-t", "h200x2") == first


def test_a_problem_that_cannot_be_bounded_is_still_checked_and_timed(tmp_path):
    # its reference fails while traced (any dispatch mode watching it) and runs when profiled: the run goes on, the
    # good problem after it is profiled too, and the records say the bound is missing and why
    from pkroof.profilers.profile import profile

    odd = tmp_path / "untraceable.py"
    odd.write_text(
        HEAD + "from torch.utils._python_dispatch import _get_current_dispatch_mode\n\n"
        "def inputs(rank, world_size, *, seed, device, n=64):\n    return (torch.ones(n, device=device),)\n\n"
        "def reference(x):\n"
        "    if _get_current_dispatch_mode() is not None:\n        raise RuntimeError('cannot be watched')\n"
        "    out = x.clone()\n    dist.all_reduce(out)\n    return out\n"
    )
    lines = []
    written = profile([str(odd), "all-reduce"], impls=[], world_size=2, shape=None, overrides={},
                      out_dir=tmp_path / "out", timeout_s=60, resume=False, topology="h200x2",
                      log=lines.append)  # fmt: skip
    by_problem = {r["problem"]: r for r in written}
    mine = by_problem[str(odd)]
    assert mine["status"] == "correct" and mine["median_s"] > 0
    assert "cannot be watched" in mine["unbounded"] and "workload" not in mine
    assert by_problem["all-reduce"]["status"] == "correct" and "unbounded" not in by_problem["all-reduce"]
    assert any("no bound" in line and "checked and timed all the same" in line for line in lines)


def test_code_written_for_gpus_traces_where_it_would_run(tmp_path):
    # a reference that overlaps its all-reduce on a side CUDA stream, with inputs put on "cuda" by hand: traced on
    # meta tensors all the same (on a machine without a GPU); a [1024, 64] @ [64, 64] fp32 matmul: 2·1024·64·64
    p = _file(
        tmp_path,
        "streams",
        "def inputs(rank, world_size, *, seed, device, n=1024, d=64):\n"
        "    return torch.ones(n, d, device='cuda'), torch.ones(d, d).cuda()\n\n"
        "def reference(x, w):\n"
        "    side = torch.cuda.Stream()\n"
        "    y = x @ w\n"
        "    with torch.cuda.stream(side):\n"
        "        side.wait_stream(torch.cuda.current_stream())\n"
        "        dist.all_reduce(y)\n"
        "    torch.cuda.current_stream().wait_stream(side)\n"
        "    torch.cuda.synchronize()\n"
        "    return y\n",
    )
    w = trace_on_meta(p, 2, p.params())
    assert w.flops_by_dtype == {"fp32": 2 * 1024 * 64 * 64}
    assert [(op.kind, op.size_bytes) for op in w.comm] == [(Collective.ALL_REDUCE, 1024 * 64 * 4)]
    assert torch.cuda.Stream.__module__.startswith("torch")  # nothing stays patched after the trace


def test_the_shipped_traces_are_those_of_the_suite_as_it_is():
    """kernels/problems/_traced.jsonl (python -m tools.ship_traces) holds the suite's traces for
    installs without torch, keyed by each file's bytes: a problem file changed since has no entry, and fails here."""
    from pkroof.analysis import trace_cache
    from pkroof.analysis.catalogue import suite
    from pkroof.analysis.trace import NEEDS_DATA

    missing = []
    for problem in suite():
        if problem.has_workload:
            continue
        for shape in problem.shapes:
            params = problem.params(shape)
            name = trace_cache.key(problem, 2, params, None, "meta", any_torch=True)
            if trace_cache.shipped(name) is not None:
                continue
            try:
                trace_on_meta(problem, 2, params)
            except NEEDS_DATA:
                continue  # traced on CPU ranks, never shipped
            except ValueError:
                continue  # does not divide over 2 ranks
            missing.append(f"{problem.name} {shape}")
    assert not missing, f"regenerate with python -m tools.ship_traces: {missing}"
    ring = next(p for p in suite() if p.name == "ring-attention")
    name = trace_cache.key(ring, 2, ring.params(), None, "meta", any_torch=True)
    assert trace_cache.shipped(name) == trace_on_meta(ring, 2, ring.params())  # what a trace gives now


def test_opposite_directions_of_independent_ops_overlap(tmp_path):
    # rank 0 gathers 1 MiB from rank 1 while it scatters 1 MiB to it (independent data): its link carries 1 MiB each
    # way at once, so the busier direction is 1 MiB (a sum of the two ops' busier directions would say 2 MiB)
    p = _file(
        tmp_path,
        "both_ways",
        "def inputs(rank, world_size, *, seed, device, n=131072):\n"
        "    return torch.ones(n, device=device), torch.ones(2 * n, device=device)\n\n"
        "def reference(mine, whole):\n"
        "    rank, world = dist.get_rank(), dist.get_world_size()\n"
        "    got = [torch.empty_like(mine) for _ in range(world)] if rank == 0 else None\n"
        "    dist.gather(mine, got, dst=0)\n"
        "    part = torch.empty_like(mine)\n"
        "    dist.scatter(part, list(whole.chunk(world)) if rank == 0 else None, src=0)\n"
        "    return (torch.cat(got) if rank == 0 else mine.clone()), part\n",
    )
    n = 131072
    b = bound(trace_on_meta(p, 2, p.params()), resolve("h200x2").system(2))
    assert b.link_bytes_per_rank == n * 4  # 512 KiB of fp32 each way on rank 0: the busier direction once


def test_a_value_the_host_reads_orders_the_collectives_after_it(tmp_path):
    # MoE dispatch: counts exchanged, read on the host (.tolist()), then the tokens exchanged by those counts: the
    # second all-to-all cannot start before the first has finished: two steps, where two independent ones are one
    chained = _latency(
        tmp_path,
        "counts",
        "def reference(a, b, c):\n"
        "    counts = torch.tensor([1, 1], dtype=torch.int64, device=a.device)\n"
        "    got = torch.empty_like(counts)\n"
        "    dist.all_to_all_single(got, counts)\n"
        "    rows = got.tolist()\n"
        "    out = a.new_empty(sum(rows) * 512)\n"
        "    dist.all_to_all_single(out, a, [r * 512 for r in rows], [512, 512])\n"
        "    return out\n",
        how=trace,  # .tolist() needs values: CPU ranks
    )
    one = _latency(tmp_path, "single", "def reference(a, b, c):\n    out = torch.empty_like(a)\n"
                   "    dist.all_to_all_single(out, a)\n    return out\n")  # fmt: skip
    assert chained == pytest.approx(2 * one)


def test_dtensor_ops_are_counted_once(tmp_path):
    # a Shard(1) @ Shard(0) DTensor matmul is one local [64, 128] @ [128, 256] matmul per rank: 2·64·128·256 FLOPs
    # (the DTensor-level op and the local one it runs are the same work); Partial → Replicate is one all-reduce
    p = _file(
        tmp_path,
        "dtensor",
        "from torch.distributed.device_mesh import init_device_mesh\n"
        "from torch.distributed.tensor import DTensor, Partial, Replicate, Shard\n\n"
        "def inputs(rank, world_size, *, seed, device, m=64, k=256, n=256):\n"
        "    return torch.ones(m, k // world_size, device=device), torch.ones(k // world_size, n, device=device)\n\n"
        "def reference(x, w):\n"
        "    mesh = init_device_mesh('cuda', (dist.get_world_size(),))  # as torchtitan writes it\n"
        "    a = DTensor.from_local(x, mesh, [Shard(1)])\n"
        "    b = DTensor.from_local(w, mesh, [Shard(0)])\n"
        "    return (a @ b).redistribute(mesh, [Replicate()]).to_local()\n",
    )
    w = trace_on_meta(p, 2, p.params())
    assert w.flops_by_dtype == {"fp32": 2 * 64 * 128 * 256}
    assert [(op.kind, op.size_bytes) for op in w.comm] == [(Collective.ALL_REDUCE, 64 * 256 * 4)]
    # read: x [64, 128] and w [128, 256]; written: the [64, 256] output
    assert w.hbm_bytes == 4 * (64 * 128 + 128 * 256 + 64 * 256)


def test_functional_in_place_collectives_are_counted(tmp_path):
    p = _file(
        tmp_path,
        "funcol",
        "def inputs(rank, world_size, *, seed, device, n=4096):\n    return (torch.ones(n, device=device),)\n\n"
        "def reference(x):\n"
        "    y = x.clone()\n"
        "    torch.ops._c10d_functional.all_reduce_(y, 'sum', dist.group.WORLD.group_name)\n"
        "    torch.ops._c10d_functional.wait_tensor(y)\n"
        "    return y\n",
    )
    w = trace_on_meta(p, 2, p.params())
    assert [(op.kind, op.size_bytes) for op in w.comm] == [(Collective.ALL_REDUCE, 4096 * 4)]


def _error(*args) -> str:
    done = CliRunner().invoke(app, ["bound", *args])
    assert done.exit_code == 2, done.output
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.output
    return done.stderr


def test_a_reference_that_breaks_the_contract_is_one_line(tmp_path):
    body = "def inputs(rank, world_size, *, seed, device, n=64):\n    return (torch.ones(n, device=device),)\n\n"
    nothing = tmp_path / "nothing.py"
    nothing.write_text(HEAD + body + "def reference(x):\n    dist.all_reduce(x.clone())\n")
    assert "returned NoneType, no tensor" in _error(str(nothing), "-t", "h200x2")


def test_a_problem_file_may_import_its_neighbours_and_print(tmp_path):
    (tmp_path / "shapes_helper.py").write_text("ROWS = 32\n")
    path = tmp_path / "neighbour.py"
    path.write_text(
        HEAD + "from shapes_helper import ROWS\n\n"
        "def inputs(rank, world_size, *, seed, device, n=64):\n"
        "    print('drawing inputs')\n    return (torch.ones(ROWS, n, device=device),)\n\n"
        "def reference(x):\n    out = x.clone()\n    dist.all_reduce(out)\n    return out\n"
    )
    out = _json(str(path), "-t", "h200x2")  # stdout holds the JSON alone: what the file prints goes to stderr
    assert out["comm"][0]["size_bytes"] == 32 * 64 * 4


def test_complex_inputs_are_their_parts_dtype_and_refuse_another(tmp_path):
    # a complex64 input of 4096 elements is 32 KiB of fp32 parts, beside 1 KiB of bf16: the problem is fp32 (its
    # arithmetic runs in fp32), not the bf16 default of a problem without real floating inputs
    path = tmp_path / "spectral_in.py"
    path.write_text(
        HEAD + "def inputs(rank, world_size, *, seed, device, n=4096):\n"
        "    x = torch.ones(n, dtype=torch.complex64, device=device)\n"
        "    return x, torch.ones(512, dtype=torch.bfloat16, device=device)\n\n"
        "def reference(x, y):\n    out = torch.fft.ifft(x)\n    dist.all_reduce(out)\n    return out\n"
    )
    assert _json(str(path), "-t", "h200x2")["dtype"] == "fp32"
    done = CliRunner().invoke(app, ["bound", str(path), "-t", "h200x2", "-d", "bf16"])
    assert done.exit_code == 2 and "inputs are complex" in done.stderr


def test_a_collective_nccl_would_refuse_has_no_bound(tmp_path):
    # reduce_scatter_tensor of 1001 elements on 2 ranks into 500: NCCL needs input = 2 × output (1000): no roof
    path = tmp_path / "odd_split.py"
    path.write_text(
        HEAD + "def inputs(rank, world_size, *, seed, device, n=1001):\n"
        "    return (torch.zeros(n, dtype=torch.bfloat16, device=device),)\n\n"
        "def reference(x):\n"
        "    out = torch.empty(x.numel() // dist.get_world_size(), dtype=x.dtype, device=x.device)\n"
        "    dist.reduce_scatter_tensor(out, x)\n    return out\n"
    )
    done = CliRunner().invoke(app, ["bound", str(path), "-t", "h200x2"])
    assert done.exit_code == 2 and "has 1001 elements, not 2 ranks × 500: NCCL refuses it" in done.stderr
