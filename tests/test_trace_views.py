"""Data flows through views and `out=` (issue 32 item 6): a collective that reads a buffer written through a view of
it, or by a matmul with `out=` a slice of it, waits for the collectives that write depended on. The latency term
counts the steps of the longest such chain: a chain of k collectives costs k times one collective's latency."""

import pytest

torch = pytest.importorskip("torch")

from pkroof.analysis.catalogue import load  # noqa: E402
from pkroof.analysis.trace import trace, trace_on_meta  # noqa: E402
from pkroof.rooflines import bound  # noqa: E402
from pkroof.topology import resolve  # noqa: E402

HEAD = "import torch\nimport torch.distributed as dist\n\n"
INPUTS = (
    "def inputs(rank, world_size, *, seed, device, n=1024):\n"
    "    return tuple(torch.ones(n, device=device) for _ in range(2))\n\n"
)


def _latency(tmp_path, name: str, reference: str, *, how=trace_on_meta) -> float:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + INPUTS + reference)
    p = load(str(path))
    return bound(how(p, 2, p.params()), resolve("h200x2").system(2)).t_latency_s


def _one(tmp_path) -> float:
    return _latency(tmp_path, "one", "def reference(a, b):\n    a = a.clone()\n    dist.all_reduce(a)\n    return a\n")


# a buffer written through a view of it: each expression is a view of `flat` (1024 fp32) covering its first bytes
VIEWS = {
    "slice": "flat[:512]",
    "narrow": "flat.narrow(0, 0, 512)",
    "select": "flat.view(2, 512).select(0, 0)",
    "view": "flat.view(2, 512)[0]",
    "reshape": "flat.reshape(4, 256)[:2]",
    "as_strided": "flat.as_strided((256,), (2,), 0)",
    "unflatten": "flat.unflatten(0, (2, 512))[0]",
}


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_a_collective_on_a_buffer_written_through_a_view_waits_for_the_write(tmp_path, view):
    # a all-reduced (step 1); its first half copied into a view of a fresh buffer, then the whole buffer all-reduced:
    # the second all-reduce reads what the first delivered: 2 steps, twice one all-reduce's latency
    chained = _latency(
        tmp_path,
        "viewed",
        "def reference(a, b):\n"
        "    a = a.clone()\n    dist.all_reduce(a)\n"
        "    flat = torch.zeros_like(b)\n"
        f"    dst = {view}\n"
        "    dst.copy_(a[: dst.numel()].view_as(dst))\n"
        "    dist.all_reduce(flat)\n"
        "    return a, flat\n",
    )
    assert chained == pytest.approx(2 * _one(tmp_path))


def _powersgd(chained: bool) -> str:
    """PowerSGD's rank-4 step on a 32×32 matrix M, P and Q views of one flat buffer: P = M·Q₀ (bmm, out= P's view),
    all-reduce P; Q = Mᵀ·P (bmm, out= Q's view), all-reduce Q. Unchained, Q is Mᵀ·Q₀: nothing of P's all-reduce."""
    src = "p" if chained else "q0"
    return (
        "def reference(a, b):\n"
        "    m = a.view(1, 32, 32)\n"
        "    flat = torch.empty(2 * 32 * 4, device=a.device)\n"
        "    p, q = flat[:128].view(1, 32, 4), flat[128:].view(1, 32, 4)\n"
        "    q0 = b[:128].view(1, 32, 4)\n"
        "    torch.bmm(m, q0, out=p)\n"
        "    dist.all_reduce(flat[:128])\n"
        f"    torch.bmm(m.transpose(1, 2), {src}, out=q)\n"
        "    dist.all_reduce(flat[128:])\n"
        "    return flat\n"
    )


@pytest.mark.parametrize("how", [trace_on_meta, trace], ids=["meta", "cpu"])
def test_powersgds_q_all_reduce_waits_for_p_through_bmm_out_into_one_flat_buffer(tmp_path, how):
    # chained: P's all-reduce, then Q's (Q = Mᵀ·P read the all-reduced P): 2 steps; unchained: the two all-reduces
    # write and read disjoint halves of the buffer (bytes [0, 512) and [512, 1024)), on data of neither: 1 step
    chained = _latency(tmp_path, "psgd", _powersgd(chained=True), how=how)
    apart = _latency(tmp_path, "psgd_apart", _powersgd(chained=False), how=how)
    one = _one(tmp_path)
    assert chained == pytest.approx(2 * one) and apart == pytest.approx(one)


def test_mm_out_into_a_buffer_carries_the_dependency(tmp_path):
    # x all-reduced (step 1); mm(x, w, out=buf) into a preallocated buffer; buf all-reduced (step 2); then its row
    # copied into a view of a third buffer that is all-reduced whole (step 3): 3 steps
    chained = _latency(
        tmp_path,
        "mm_out",
        "def reference(a, b):\n"
        "    x = a.clone().view(32, 32)\n    dist.all_reduce(x)\n"
        "    buf = torch.empty(32, 32, device=a.device)\n"
        "    torch.mm(x, b.view(32, 32), out=buf)\n"
        "    dist.all_reduce(buf)\n"
        "    last = torch.zeros(64, device=a.device)\n"
        "    last.narrow(0, 32, 32).copy_(buf[0])\n"
        "    dist.all_reduce(last)\n"
        "    return last\n",
    )
    assert chained == pytest.approx(3 * _one(tmp_path))
