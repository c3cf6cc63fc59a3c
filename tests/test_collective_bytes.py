"""Every torch collective signature's bytes from what it really moves (issue 32 item 3), traced on meta tensors over
2 ranks. A row is 128 bf16 = 256 B (all-to-all, all-gather into a tensor, reduce-scatter of a tensor) or 16 fp32 =
64 B (lists). nccl-tests' size: an all-to-all's input, an all-gather's output, a reduce-scatter's input; where a
rank's bytes are uneven, its own bytes to (send) and from (recv) its peers, its own block not counted.
"""

import pytest

torch = pytest.importorskip("torch")

from pkroof.analysis.catalogue import load  # noqa: E402
from pkroof.analysis.trace import trace_on_meta  # noqa: E402
from pkroof.rooflines import Collective  # noqa: E402

HEAD = "import torch\nimport torch.distributed as dist\nimport torch.distributed._functional_collectives as fc\n\n"
ROW = 128 * 2  # bf16
LIST_ROW = 16 * 4  # fp32


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("PKROOF_TRACE_CACHE", str(tmp_path / "cache"))


def _per_rank(tmp_path, reference: str, rows: str = "4", width: int = 128, dtype: str = "bfloat16") -> dict:
    """{rank: its one comm op} of `reference(x)`, x [rows, width] (rows may name `rank`)."""
    path = tmp_path / "problem.py"
    path.write_text(
        HEAD + "def inputs(rank, world_size, *, seed, device):\n"
        f"    return (torch.ones({rows}, {width}, device=device, dtype=torch.{dtype}),)\n\n" + reference
    )
    p = load(str(path))
    w = trace_on_meta(p, 2, p.params())
    found = {r: v.comm for v, rs in zip(w.views(), w.view_ranks(), strict=True) for r in rs}
    assert all(len(ops) == 1 for ops in found.values())
    return {r: ops[0] for r, ops in found.items()}


def _moved(op) -> tuple:
    return op.kind, op.size_bytes, op.send_bytes, op.recv_bytes


def test_all_to_all_single_without_splits_is_even(tmp_path):
    ops = _per_rank(tmp_path, "def reference(x):\n    out = torch.empty_like(x)\n    dist.all_to_all_single(out, x)\n"
                              "    return out\n")  # fmt: skip
    assert all(_moved(op) == (Collective.ALL_TO_ALL, 4 * ROW, None, None) for op in ops.values())


def test_all_to_all_single_with_splits_moves_each_ranks_own_rows(tmp_path):
    # rank 0 sends 1 row to itself and 3 to rank 1, receives 1 from itself and 1 from rank 1; rank 1 the reverse
    ref = (
        "def reference(x):\n"
        "    rank = dist.get_rank()\n"
        "    recv = [1, 1] if rank == 0 else [3, 3]\n"
        "    out = x.new_empty(sum(recv), x.shape[1])\n"
        "    dist.all_to_all_single(out, x, recv, [1, 3])\n"
        "    return out\n"
    )
    ops = _per_rank(tmp_path, ref)
    assert _moved(ops[0]) == (Collective.ALL_TO_ALL, 4 * ROW, 3 * ROW, 1 * ROW)
    assert _moved(ops[1]) == (Collective.ALL_TO_ALL, 4 * ROW, 1 * ROW, 3 * ROW)


def test_all_to_all_single_splits_an_output_without_splits_by_its_own_rows(tmp_path):
    # torchrec's backward: input splits given, output_split_sizes None, and an output of other rows than the input:
    # the output is split evenly by ITS rows. Both ranks send [2, 4] of their 6 rows; rank 0's output holds 4 rows
    # (2 from each rank), rank 1's 8 (4 from each). Rank 0 sends 4 rows and receives 2; rank 1 sends 2, receives 4
    ref = (
        "def reference(x):\n"
        "    out = x.new_empty(4 if dist.get_rank() == 0 else 8, x.shape[1])\n"
        "    dist.all_to_all_single(out, x, None, [2, 4])\n"
        "    return out\n"
    )
    ops = _per_rank(tmp_path, ref, rows="6")
    assert _moved(ops[0]) == (Collective.ALL_TO_ALL, 6 * ROW, 4 * ROW, 2 * ROW)
    assert _moved(ops[1]) == (Collective.ALL_TO_ALL, 6 * ROW, 2 * ROW, 4 * ROW)


def test_functional_all_to_all_single_with_splits_moves_each_ranks_own_rows(tmp_path):
    ref = (
        "def reference(x):\n"
        "    recv = [1, 1] if dist.get_rank() == 0 else [3, 3]\n"
        "    return fc.all_to_all_single(x, recv, [1, 3], dist.group.WORLD)\n"
    )
    ops = _per_rank(tmp_path, ref)
    assert _moved(ops[0]) == (Collective.ALL_TO_ALL, 4 * ROW, 3 * ROW, 1 * ROW)
    assert _moved(ops[1]) == (Collective.ALL_TO_ALL, 4 * ROW, 1 * ROW, 3 * ROW)


def test_all_gather_into_tensor_is_its_output(tmp_path):
    ref = (
        "def reference(x):\n    out = x.new_empty(2 * x.shape[0], x.shape[1])\n"
        "    dist.all_gather_into_tensor(out, x)\n    return out\n"
    )
    assert all(
        _moved(op) == (Collective.ALL_GATHER, 2 * 4 * ROW, None, None) for op in _per_rank(tmp_path, ref).values()
    )


def test_reduce_scatter_tensor_is_its_input(tmp_path):
    ref = (
        "def reference(x):\n    out = x.new_empty(x.shape[0] // 2, x.shape[1])\n"
        "    dist.reduce_scatter_tensor(out, x)\n    return out\n"
    )
    ops = _per_rank(tmp_path, ref)
    assert all(_moved(op) == (Collective.REDUCE_SCATTER, 4 * ROW, None, None) for op in ops.values())


def test_an_uneven_all_gather_list_moves_each_ranks_own_rows(tmp_path):
    # rank r holds r + 1 rows: each sends its own to the other rank and receives the other's
    ref = (
        "def reference(x):\n"
        "    out = [x.new_empty(j + 1, x.shape[1]) for j in range(dist.get_world_size())]\n"
        "    dist.all_gather(out, x)\n"
        "    return torch.cat(out)\n"
    )
    ops = _per_rank(tmp_path, ref, rows="rank + 1", width=16, dtype="float32")
    assert _moved(ops[0]) == (Collective.ALL_GATHER, 3 * LIST_ROW, 1 * LIST_ROW, 2 * LIST_ROW)
    assert _moved(ops[1]) == (Collective.ALL_GATHER, 3 * LIST_ROW, 2 * LIST_ROW, 1 * LIST_ROW)


def test_an_uneven_reduce_scatter_list_moves_each_ranks_own_rows(tmp_path):
    # rank r's output is r + 1 rows: each sends the other's block and receives its own block from the other rank
    ref = (
        "def reference(x):\n"
        "    rank = dist.get_rank()\n"
        "    ins = [x.new_ones(j + 1, x.shape[1]) for j in range(dist.get_world_size())]\n"
        "    out = x.new_empty(rank + 1, x.shape[1])\n"
        "    dist.reduce_scatter(out, ins)\n"
        "    return out\n"
    )
    ops = _per_rank(tmp_path, ref, width=16, dtype="float32")
    assert _moved(ops[0]) == (Collective.REDUCE_SCATTER, 3 * LIST_ROW, 2 * LIST_ROW, 1 * LIST_ROW)
    assert _moved(ops[1]) == (Collective.REDUCE_SCATTER, 3 * LIST_ROW, 1 * LIST_ROW, 2 * LIST_ROW)
