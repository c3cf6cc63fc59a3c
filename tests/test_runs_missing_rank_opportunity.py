"""With a rank missing, a collective cannot be matched across ranks: its wait for the last rank is not split from its
transfer, and its opportunity says so instead of "measured after the last rank arrived"."""

from runs_traces import Synthetic, nccl_args

from pkroof.runs import analyze_traces

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _rank(tmp_path, rank: int):
    """Rank `rank` of 2: an all-reduce of 2^22 fp32 elements (16 MiB) taking 10 ms, far below any roof."""
    t = Synthetic(rank=rank, world=2)
    t.kernel(AR, 100, 10_000, args=nccl_args("allreduce", 2**22, "Float", [0, 1]))
    return t.write(tmp_path / f"rank{rank}.json")


def test_with_a_rank_missing_the_opportunity_says_the_wait_is_not_split(tmp_path):
    r = analyze_traces(_rank(tmp_path, 0), topology="hgx-h100-8")
    (what,) = r.opportunities["what"]
    assert "the wait for the last rank cannot be split from the transfer" in what
    assert "after the last rank arrived" not in what


def test_with_every_rank_the_opportunity_is_measured_after_the_last_rank_arrived(tmp_path):
    r = analyze_traces([_rank(tmp_path, 0), _rank(tmp_path, 1)], topology="hgx-h100-8")
    assert len(r.opportunities) == 1
    assert all("after the last rank arrived" in w for w in r.opportunities["what"])
