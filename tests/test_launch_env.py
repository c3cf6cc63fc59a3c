"""A launched job, on paper: which launcher started this process and where it sits (torchrun's and srun's
variables), how rank 0 picks the failure to record, how the job's placement is read and checked, and how a record of
2 nodes of 2 ranks is bounded (its own placement, not one node of 4)."""

from types import SimpleNamespace

import pytest

from pkroof.profilers.across_nodes import Placement, job_topology, placement
from pkroof.records import format as records
from pkroof.runtime.launched import Outcome, first_failure, launched
from pkroof.topology import resolve

TORCHRUN = {
    "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "GROUP_RANK": "1", "MASTER_ADDR": "node-a",
    "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_RESTART_COUNT": "0",
    "TORCHELASTIC_USE_AGENT_STORE": "True",
}  # fmt: skip
SRUN = {
    "SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "2", "SLURM_STEP_ID": "0",
    "SLURM_JOB_ID": "77", "MASTER_ADDR": "node-a", "MASTER_PORT": "29500", "SLURM_NTASKS": "8",
}  # fmt: skip


def test_torchrun_variables_place_this_process():
    at = launched(TORCHRUN)
    assert (at.rank, at.world, at.local_rank, at.node, at.launcher) == (3, 4, 1, "1", "torchrun")
    assert (at.addr, at.port, at.agent_store) == ("node-a", 29500, True)  # torchrun's agent serves the store


def test_srun_variables_place_this_process_and_rank_0_serves_the_store():
    at = launched(SRUN)
    assert (at.rank, at.world, at.local_rank, at.node, at.launcher, at.agent_store) == (5, 8, 1, "2", "srun", False)


def test_nothing_launched_and_a_one_rank_job_are_a_plain_local_profile():
    assert launched({}) is None
    assert launched(TORCHRUN | {"WORLD_SIZE": "1", "RANK": "0"}) is None
    # a batch script itself has SLURM_PROCID and SLURM_NTASKS but no step: pkroof there starts its own ranks
    assert launched({k: v for k, v in SRUN.items() if k != "SLURM_STEP_ID"}) is None


@pytest.mark.parametrize(
    "env, says",
    [
        ({k: v for k, v in SRUN.items() if k != "MASTER_ADDR"}, "needs MASTER_ADDR: export it in the batch script"),
        (TORCHRUN | {"RANK": "four"}, "RANK='four' is not a whole number"),
        (TORCHRUN | {"RANK": "4"}, "rank 4 is outside a job of 4 ranks"),
    ],
)
def test_a_launch_whose_variables_do_not_add_up_is_one_line(env, says):
    with pytest.raises(ValueError, match=says):
        launched(env)


def test_the_failure_recorded_is_the_cause_not_its_echoes():
    # rank 2 was killed (no message: a signal) at order 3; ranks 0 and 1 raised on the broken connection before
    # anyone said rank 2's outcome; rank 3 was stopped. The signal is the cause.
    outcomes = [
        Outcome(0, "failed", "Connection closed by peer", exitcode=1, order=1),
        Outcome(1, "failed", "Connection closed by peer", exitcode=1, order=2),
        Outcome(2, "failed", "", exitcode=-9, order=3),
        Outcome(3, "stopped", "stopped: rank 2 failed first", order=4),
    ]
    assert first_failure(outcomes).rank == 2
    assert first_failure([Outcome(0, "ok"), Outcome(1, "timeout", order=1), Outcome(2, "stopped", order=2)]).rank == 1
    assert first_failure([Outcome(0, "ok"), Outcome(1, "ok")]) is None


def _control(nodes_of_ranks: list[str], gpus: int = 0, argv: list[str] | None = None):
    hellos = [{"node": n, "host": f"host-{n}", "gpus": gpus, "local_rank": nodes_of_ranks[:r].count(n),
               "argv": ["profile", "all-reduce"]} for r, n in enumerate(nodes_of_ranks)]  # fmt: skip
    if argv is not None:
        hellos[-1]["argv"] = argv
    return SimpleNamespace(hellos=lambda _: hellos, launch=SimpleNamespace(launcher="torchrun"))


def test_placement_from_the_ranks_hellos():
    place = placement(_control(["0", "0", "1", "1"]))
    assert (place.nodes, place.ranks_per_node, place.backend, place.hosts) == (2, 2, "gloo", ("host-0", "host-1"))
    assert placement(_control(["0", "0", "1", "1"], gpus=2)).backend == "nccl"  # each rank has its local GPU
    assert placement(_control(["0", "0", "0", "1", "1", "1"], gpus=2)).backend == "gloo"  # local rank 2 has none
    # one GPU a task: NCCL where each task sees another (srun --gpus-per-task=1 sets CUDA_VISIBLE_DEVICES), gloo where
    # a node's tasks all see the same one (NCCL would refuse: "Duplicate GPU detected")
    bound = _control(["0", "0", "1", "1"], gpus=1)
    for r, hello in enumerate(bound.hellos(0)):
        hello["visible"] = str(r % 2)
    assert placement(bound).backend == "nccl"
    same = placement(_control(["0", "0", "1", "1"], gpus=1))
    assert same.backend == "gloo" and "node 0's ranks have no GPU each" in same.why_gloo


@pytest.mark.parametrize(
    "nodes, says",
    [(["0", "0", "0", "1"], "3 on node 0, 1 on node 1"), (["0", "1", "0", "1"], "must be consecutive")],
)
def test_unequal_or_interleaved_nodes_are_refused(nodes, says):
    with pytest.raises(ValueError, match=says):
        placement(_control(nodes))


def test_a_rank_started_with_another_command_is_refused():
    with pytest.raises(ValueError, match="rank 3 was started as `profile all-gather`, unlike rank 0"):
        placement(_control(["0", "0", "1", "1"], argv=["profile", "all-gather"]))


def test_the_job_is_bounded_on_its_own_nodes():
    place = Placement(2, 2, "nccl", ("a", "b"), "torchrun")
    lines: list[str] = []
    assert job_topology(resolve("hgx-h100-8"), None, place, lines.append).name == "hgx-h100-8@2"
    assert "joined by its NICs for the job's 2 nodes" in lines[0]  # said, not silent
    assert job_topology(resolve("hgx-h100-8"), 2, place, lines.append).nodes == 2
    with pytest.raises(ValueError, match="--nodes 4, but the launch runs on 2 nodes"):
        job_topology(resolve("hgx-h100-8"), 4, place, lines.append)
    with pytest.raises(ValueError, match="its nodes have 2 GPUs"):  # 4 ranks a node on nodes of 2 GPUs
        job_topology(resolve("h200x2"), None, Placement(2, 4, "nccl"), lines.append)


def test_a_nodes_nics_are_shared_by_the_ranks_on_it():
    # hgx-h100-8: 8 ConnectX-7 NICs of 50 GB/s a node. With all 8 GPUs of each node in the job each GPU's share is
    # 8 × 50 / 8 = 50 GB/s; with 2 ranks a node the node's NICs serve 2 GPUs: 8 × 50 / 2 = 200 GB/s each at most
    # (the bound's generous share: a GPU may reach the NICs beside other GPUs through the PCIe switches).
    topo = resolve("hgx-h100-8", nodes=2)
    assert topo.system(16).network.peak_bandwidth_Bps == pytest.approx(8 * 50e9 / 8)
    two = topo.system(4, 2)
    assert (two.num_nodes, two.ranks_per_node) == (2, 2)
    assert two.network.peak_bandwidth_Bps == pytest.approx(8 * 50e9 / 2)
    assert topo.system(4).num_nodes == 1  # unplaced: as few nodes as hold 4 ranks
    with pytest.raises(ValueError, match="3 nodes of 2 ranks"):
        resolve("hgx-h100-8", nodes=2).system(6, 2)


def _record(**placed) -> dict:
    return {
        "schema": records.SCHEMA, "problem": "all-reduce", "shape": "small", "params": {"size_bytes": 2**20},
        "impl": "reference", "world_size": 4, "status": "correct", "median_s": 1e-3, **placed,
    }  # fmt: skip


def test_a_records_placement_must_add_up(tmp_path):
    import json

    path = tmp_path / "results.jsonl"
    bad = [_record(nodes=2, ranks_per_node=3), _record(nodes=0, ranks_per_node=4), _record(nodes=True)]
    path.write_text("".join(json.dumps(r) + "\n" for r in [_record(nodes=2, ranks_per_node=2), *bad]))
    found, unreadable = records.read(path)
    assert len(found) == 1 and records.placement(found[0]) == (2, 2)
    assert "2 nodes of 3 ranks is not its world_size 4" in unreadable[0]
    assert "nodes 0 is not a number of nodes" in unreadable[1] and "nodes True" in unreadable[2]
    assert records.placement(_record()) == (1, 4)  # a record before launched jobs: one node of all its ranks


def test_a_two_node_record_is_bounded_as_two_nodes_of_two():
    from pkroof.analysis.problem import analyze
    from pkroof.records.evaluate import evaluate

    topo = resolve("hgx-h100-8")
    one, two = (evaluate([r], topo, log=lambda _: None).records[0]
                for r in (_record(), _record(nodes=2, ranks_per_node=2, launcher="torchrun")))  # fmt: skip
    placed = analyze("all-reduce", topology=topo.with_nodes(2), world_size=4, ranks_per_node=2, params={})
    assert two["t_roof_s"] == pytest.approx(placed.bound.t_roof_s)
    assert placed.bound.system.num_nodes == 2
    # across the network each of 2 ranks a node moves its half's all-reduce over NICs slower than NVLink: the
    # 2-node roof is above the 1-node roof of the same 4 ranks
    assert two["t_roof_s"] > one["t_roof_s"]


class _Store:
    """The launch's store, in memory: what Control calls of torch's TCPStore."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def set(self, key, value):
        self.data[key] = value.encode() if isinstance(value, str) else value

    def get(self, key):
        return self.data[key]

    def check(self, keys):
        return all(k in self.data for k in keys)

    def add(self, key, amount):
        self.data[key] = str(int(self.data.get(key, b"0")) + amount).encode()
        return int(self.data[key])


def test_a_rank_still_starting_is_not_lost_but_one_that_stops_beating_is(monkeypatch):
    from pkroof.runtime import launched as module
    from pkroof.runtime.launched import Control, LostError

    clock = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    store = _Store()
    leader = Control(launched(TORCHRUN | {"RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0"}), store, lost_s=10)
    for _ in range(5):  # 50 s of rank 1..3 not beating at all: still starting (importing torch on a slow node)
        clock[0] += 10.5
        leader.check()
    for r in (1, 2, 3):
        store.add(f"beat/{r}", 1)
    clock[0] += 1
    leader.check()  # seen beating
    for r in (1, 3):
        store.add(f"beat/{r}", 1)
    clock[0] += 10.5  # rank 2's counter has not moved for 10.5 s
    with pytest.raises(LostError, match="rank 2 is gone: no heartbeat for 10 s"):
        leader.check()
    assert "rank 2 is gone" in store.get("abort").decode()  # rank 0 says it to every rank


def test_a_launched_records_topology_name_resolves():
    # records of a job on 2 nodes of hgx-h100-8 joined by its NICs name "hgx-h100-8@2": that name is the topology
    topo = resolve("hgx-h100-8@2")
    assert (topo.name, topo.nodes, topo.gpus_per_node) == ("hgx-h100-8@2", 2, 8)
    assert resolve("hgx-h100-8@2", nodes=4).nodes == 4
    with pytest.raises(ValueError, match="unknown topology 'hgx-h100-8@two'"):
        resolve("hgx-h100-8@two")


def test_a_peers_broken_connection_is_not_taken_for_the_cause():
    # rank 3 raised its own error; rank 2's gloo read failed when rank 3's process left, and its control happened to
    # see that first (order 1): the record names rank 3, whose error is not a broken connection's
    outcomes = [
        Outcome(2, "failed", "RuntimeError: [pair.cc:537] Read error: Connection reset by peer", exitcode=1, order=1),
        Outcome(3, "failed", "RuntimeError: boom on rank 3", exitcode=1, order=2),
        Outcome(0, "stopped", "stopped: rank 2 failed first", order=3),
    ]
    assert first_failure(outcomes).rank == 3
    # two causes of their own: the one raised first (the error file's time), whatever order their controls said them
    a = Outcome(1, "failed", "ValueError: a", exitcode=1, order=1, raised_ns=2_000)
    b = Outcome(2, "failed", "ValueError: b", exitcode=1, order=2, raised_ns=1_000)
    assert first_failure([a, b]).rank == 2


def test_every_node_must_run_rank_0s_files(tmp_path):
    from pkroof.profilers.across_nodes import _differences, check_files, file_hashes

    here = tmp_path / "impl.py"
    here.write_text("def f(x):\n    return x\n")
    expected = file_hashes([str(here), str(tmp_path / "gone.py")])
    assert expected[str(tmp_path / "gone.py")] == ""  # rank 0 itself lacks it: the check is of the others
    expected[str(tmp_path / "gone.py")] = "0" * 64
    here.write_text("def f(x):\n    return x + 1\n")  # this node's copy differs from rank 0's
    lines = _differences(expected)
    assert lines == [f"{tmp_path / 'gone.py'}: not on this node", f"{here}: other bytes than rank 0's"]
    control = SimpleNamespace(ask=lambda _: [[], lines], where=lambda r: " (node 1, b)")
    with pytest.raises(ValueError, match=r"rank 2 \(node 1, b\): .*gone.py: not on this node \(and 1 more\)"):
        check_files(control, [str(here)])
    check_files(SimpleNamespace(ask=lambda _: [[], []], where=lambda r: ""), [str(here)])  # the same everywhere


def test_ranks_that_fall_silent_together_are_named_together(monkeypatch):
    from pkroof.runtime import launched as module
    from pkroof.runtime.launched import Control, LostError

    clock = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    store = _Store()
    for r, node in ((1, "0"), (2, "1"), (3, "1")):
        store.set(f"hello/{r}", f'{{"node": "{node}", "host": "h{node}"}}')
        store.add(f"beat/{r}", 1)
    leader = Control(launched(TORCHRUN | {"RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0"}), store, lost_s=10)
    leader.check()  # every rank seen beating at t = 1000
    store.add("beat/1", 1)
    clock[0] += 10.6  # ranks 2 and 3 (node 1: its agent stopped rank 3 as rank 2 died) silent since 1000; rank 1 not
    with pytest.raises(LostError, match=r"^ranks 2, 3 \(node 1, h1\) are gone: no heartbeat for 10 s"):
        leader.check()
