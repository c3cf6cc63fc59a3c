"""The launched profile's GPU form, for a machine with two GPUs: two torchrun "nodes" of one GPU each
(CUDA_VISIBLE_DEVICES 0 and 1) with NCCL's peer-to-peer and shared-memory paths off (NCCL_P2P_DISABLE=1,
NCCL_SHM_DISABLE=1), so NCCL joins them over its network transport as it would two nodes. A collective and a
tensor-parallel GEMM are checked and timed over NCCL, recorded by rank 0 as 2 nodes of 1 rank, and bounded as such."""

from pathlib import Path

import pytest
from launched_nodes import Launch, marked

pytestmark = [pytest.mark.gpu, pytest.mark.multigpu]
IMPLS = Path(__file__).parent / "data" / "problems" / "launched_impls.py"
AS_NODES = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}


def test_two_one_gpu_nodes_over_nccl_network_transport(tmp_path):
    node_env = [AS_NODES | {"CUDA_VISIBLE_DEVICES": str(gpu)} for gpu in (0, 1)]
    args = ["all-reduce", "gemm-all-reduce", "--out", str(tmp_path / "out"), "-t", "h200x2", "--timeout", "120"]
    launch = Launch(tmp_path, args, per_node=1, node_env=node_env)
    assert launch.wait() == [0, 0], launch.logs()
    rows = launch.records()
    assert {r["problem"] for r in rows} == {"all-reduce", "gemm-all-reduce"}
    for r in rows:
        assert r["status"] == "correct", (r["impl"], r.get("message"))
        assert (r["world_size"], r["nodes"], r["ranks_per_node"]) == (2, 2, 1)
        assert r["environment"]["backend"] == "nccl" and r["topology"]["name"] == "h200x2@2"
    assert marked(launch.mark) == []


def test_a_crash_on_the_second_gpu_node_is_recorded_and_ends_nothing(tmp_path):
    node_env = [AS_NODES | {"CUDA_VISIBLE_DEVICES": str(gpu)} for gpu in (0, 1)]
    args = ["all-reduce", "--size", "1M", "--out", str(tmp_path / "out"), "-t", "h200x2", "--timeout", "60"]
    args += ["--impl", f"{IMPLS}:crashes_on_rank_1", "--impl", f"{IMPLS}:correct"]
    launch = Launch(tmp_path, args, per_node=1, node_env=node_env)
    assert launch.wait() == [0, 0], launch.logs()
    by = {r["impl"].rpartition(":")[2]: r for r in launch.records()}
    assert by["crashes_on_rank_1"]["status"] == "crashed"
    assert by["crashes_on_rank_1"]["message"].startswith("rank 1 (node 1,")
    assert by["correct"]["status"] == "correct"
    assert marked(launch.mark) == []
