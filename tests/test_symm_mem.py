"""torch's symmetric-memory ops priced as the compute and communication they perform (issue 32 item 4), traced on
meta tensors over 2 ranks from their schema (none runs on CPU), and an op the tracer cannot price named in the
output, never a silent zero. A [m, k] bf16 shard, B [k, n] bf16: m=64, k=128, n=256.
"""

import json

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from pkroof.analysis.catalogue import load  # noqa: E402
from pkroof.analysis.trace import trace_on_meta  # noqa: E402
from pkroof.cli import app  # noqa: E402
from pkroof.rooflines import Collective  # noqa: E402

M, K, N, WORLD = 64, 128, 256, 2
HEAD = """
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory  # noqa: F401


def inputs(rank, world_size, *, seed, device, m=64, k=128, n=256):
    bf16 = torch.bfloat16
    return torch.empty(m, k, device=device, dtype=bf16), torch.empty(k, n, device=device, dtype=bf16)


"""


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("PKROOF_TRACE_CACHE", "off")


def _file(tmp_path, reference: str):
    path = tmp_path / "symm.py"
    path.write_text(HEAD + reference)
    return path


def _trace(tmp_path, reference: str):
    p = load(str(_file(tmp_path, reference)))
    return trace_on_meta(p, WORLD, p.params())


def test_fused_all_gather_matmul_is_an_all_gather_and_the_gathered_matmul(tmp_path):
    w = _trace(
        tmp_path,
        "def reference(a, b):\n"
        "    _, (out,) = torch.ops.symm_mem.fused_all_gather_matmul(a, [b], 0, dist.group.WORLD.group_name)\n"
        "    return out\n",
    )
    assert [(op.kind, op.size_bytes) for op in w.comm] == [(Collective.ALL_GATHER, WORLD * M * K * 2)]
    assert w.flops_by_dtype == {"bf16": 2 * (WORLD * M) * K * N}


def test_fused_matmul_reduce_scatter_is_the_matmul_and_a_reduce_scatter_of_its_output(tmp_path):
    w = _trace(
        tmp_path,
        "def reference(a, b):\n"
        "    return torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, 'sum', 0, dist.group.WORLD.group_name)\n",
    )
    assert [(op.kind, op.size_bytes) for op in w.comm] == [(Collective.REDUCE_SCATTER, M * N * 2)]
    assert w.flops_by_dtype == {"bf16": 2 * M * K * N}


def test_one_shot_and_two_shot_all_reduce_are_all_reduces_one_after_the_other(tmp_path):
    w = _trace(
        tmp_path,
        "def reference(a, b):\n"
        "    x = torch.ops.symm_mem.one_shot_all_reduce(a, 'sum', dist.group.WORLD.group_name)\n"
        "    return torch.ops.symm_mem.two_shot_all_reduce_(x, 'sum', dist.group.WORLD.group_name)\n",
    )
    assert [(op.kind, op.size_bytes) for op in w.comm] == [(Collective.ALL_REDUCE, M * K * 2)] * 2
    assert w.comm[1].after == (w.comm[0].name,)  # the two-shot reduces the one-shot's result
    assert w.flops_by_dtype == {}


def test_a_symmetric_memory_op_it_cannot_price_is_named_in_text_and_json(tmp_path):
    # all_to_all_vdev's splits live on the device: no trace can know them, so it is named, not counted as zero
    path = _file(
        tmp_path,
        "def reference(a, b):\n"
        "    out = torch.empty_like(a)\n"
        "    splits = torch.empty(3, 2, dtype=torch.int64, device=a.device)\n"
        "    torch.ops.symm_mem.all_to_all_vdev(a, out, splits[0], splits[1:], dist.group.WORLD.group_name)\n"
        "    x = a.clone()\n"
        "    dist.all_reduce(x)\n"
        "    return out, x\n",
    )
    args = ["bound", str(path), "-t", "h200x2", "-n", "2"]
    done = CliRunner().invoke(app, [*args, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["uncounted"] == ["communication symm_mem.all_to_all_vdev"]
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0 and "symm_mem.all_to_all_vdev" in text.stdout


def test_an_op_on_real_tensors_is_never_run_its_outputs_come_from_its_schema():
    # a traced reference moves nothing: on CPU (or CUDA) tensors the op's own kernel must not run (multimem ops would
    # use NVLink multicast); its output is shaped from the schema instead, as an all-reduce's: like its input
    from pkroof.analysis.symm_mem_ops import run

    class NeverRun:
        _schema = torch.ops.aten.add.Tensor._schema
        _overloadpacket = torch.ops.aten.add

        def __call__(self, *args, **kwargs):
            raise AssertionError("the op's own kernel ran on real tensors")

    x = torch.ones(4, 3)
    out = run(NeverRun(), (x, x), {})
    assert out.shape == (4, 3) and out.dtype == x.dtype
