"""Messages that name the real fault: numSms of the wrong type, a .json.gz that is not gzip, an invalid world size,
a --topology joined into more nodes to hold the job."""

import pytest
from runs_traces import H100, Synthetic, nccl_args

from pkroof.runs import analyze_traces

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _trace(tmp_path, *, world: int = 1, device: dict = H100, name: str = "rank0.json", gz: bool = False):
    t = Synthetic(rank=0, world=world, device=device)
    t.kernel(AR, 10, 5, args=nccl_args("allreduce", 1024, "Float", list(range(world))))
    return t.write(tmp_path / name, gz=gz)


def test_num_sms_as_a_string_says_the_fields_type_is_wrong(tmp_path):
    path = _trace(tmp_path, device=dict(H100, numSms="132"))
    with pytest.raises(ValueError, match=r"numSms is '132' \(str\), not a whole number: the field's type is wrong"):
        analyze_traces(path)


def test_a_json_gz_that_is_not_gzip_says_so(tmp_path):
    plain = _trace(tmp_path).read_bytes()
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(plain)  # JSON, not gzip, under a .gz name
    with pytest.raises(ValueError, match=r"rank0.json.gz: named .gz but not gzip"):
        analyze_traces(path, topology="hgx-h100-8")


def test_a_lone_file_with_world_size_minus_3_says_the_world_size_is_invalid(tmp_path):
    t = Synthetic(rank=0, world=1)
    t.doc["distributedInfo"]["world_size"] = -3
    t.kernel(AR, 10, 5, args=nccl_args("allreduce", 1024, "Float", [0]))
    with pytest.raises(ValueError, match=r"world size -3 is invalid") as e:
        analyze_traces(t.write(tmp_path / "rank0.json"), topology="hgx-h100-8")
    assert "different jobs" not in str(e.value)


def test_a_topology_joined_into_more_nodes_for_the_job_is_a_note(tmp_path):
    path = _trace(tmp_path, world=128)  # one file of a 128-rank job
    r = analyze_traces(path, topology="hgx-h100-8@2")
    nodes = 128 // 8  # 8 GPUs a node
    assert r.topology == f"hgx-h100-8@{nodes}"
    assert any(
        n == f"--topology hgx-h100-8@2 holds fewer GPUs than the job's ranks: taken as hgx-h100-8@{nodes}"
        for n in r.notes
    )
