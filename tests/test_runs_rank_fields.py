"""pkroof trace where distributedInfo lacks the rank (taken from the file name, or rank 0 for a lone file) or gives
one that is not a rank: the file-name rank carries through to every kernel, step and collective; a rank that is not
a whole number from 0 is one line."""

import pytest
from runs_traces import Synthetic, nccl_args

from pkroof.runs import analyze_traces

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _rank(folder, rank: int, world: int, *, name: str, recorded: object = None):
    """Rank `rank` of `world`: step 3 over [0, 1000) µs, one all-reduce at [100 + 10·rank, 150) µs; its
    distributedInfo rank replaced by `recorded` (None: removed)."""
    t = Synthetic(rank=rank, world=world)
    if recorded is None:
        del t.doc["distributedInfo"]["rank"]
    else:
        t.doc["distributedInfo"]["rank"] = recorded
    t.step(3, 0, 1000)
    t.kernel(AR, 100 + 10 * rank, 50 - 10 * rank, args=nccl_args("allreduce", 1024, "Float", list(range(world))))
    return t.write(folder / name)


def test_ranks_taken_from_file_names_keep_their_steps_and_collectives(tmp_path):
    paths = [_rank(tmp_path, r, 2, name=f"trace-rank-{r}.json") for r in (0, 1)]
    r = analyze_traces(paths, topology="hgx-h100-8")
    assert r.ranks == [0, 1]
    assert sorted(r.kernels["rank"]) == [0, 1]
    assert sorted(zip(r.steps["rank"], r.steps["step"], strict=True)) == [(0, 3), (1, 3)]
    (c,) = r.collectives.to_dict("records")
    assert (c["ranks"], c["last_rank"]) == ("0,1", 1)  # rank 1 started last, at 110 µs


def test_a_lone_file_without_distributed_info_is_rank_0_with_its_steps(tmp_path):
    t = Synthetic(rank=0, world=1)
    del t.doc["distributedInfo"]
    t.step(3, 0, 1000)
    t.kernel("void at::native::vectorized_elementwise_kernel<4>", 100, 50, op="aten::add")
    r = analyze_traces(t.write(tmp_path / "trace.json"), topology="hgx-h100-8")
    assert list(r.kernels["rank"]) == [0]
    assert list(zip(r.steps["rank"], r.steps["step"], strict=True)) == [(0, 3)]
    assert any("taken as rank 0" in n for n in r.notes)


@pytest.mark.parametrize("recorded", ["zero", 1.5, True, -1])
def test_a_distributed_info_rank_that_is_not_a_rank_is_one_line(tmp_path, recorded):
    path = _rank(tmp_path, 0, 2, name="rank-0.json", recorded=recorded)
    with pytest.raises(ValueError, match=r"rank-0.json: distributedInfo rank .* is not a rank") as e:
        analyze_traces(path, topology="hgx-h100-8")
    assert "\n" not in str(e.value)
