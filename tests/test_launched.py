"""`pkroof profile` as the ranks of a launched job, rehearsed on one machine: two torchrun "nodes" of 2 CPU ranks each
on localhost (gloo, static rendezvous), so global ranks 2 and 3 are node 1's and rank 0, which writes, is node 0's.
A collective and a tensor-parallel GEMM land in one results file with world size 4 on 2 nodes of 2; a crash, a hang
and a wrong answer on node 1 are each one recorded failure and the job goes on; a node-1 rank whose process is
killed ends the job on both nodes, its failure recorded, no process left anywhere."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")


from launched_nodes import Launch, children, environ, marked

from pkroof.records import format as records
from pkroof.runtime.launch import free_port

IMPLS = Path(__file__).parent / "data" / "problems" / "launched_impls.py"


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """One launch: the all-reduce's reference, a right implementation, and a crash, a hang and a wrong answer on node
    1, each checked on all 4 ranks (--timeout 20: the hang's limit)."""
    tmp = tmp_path_factory.mktemp("launched")
    impls = [f"{IMPLS}:{name}" for name in ("correct", "killed_on_node_1", "hangs_on_node_1", "wrong_on_node_1")]
    args = ["all-reduce", "--size", "64K", "--out", str(tmp / "out"), "--timeout", "20", "--iters", "3"]
    launch = Launch(tmp, args + [a for impl in impls for a in ("--impl", impl)])
    codes = launch.wait()
    return launch, codes


def test_rank_0_alone_writes_one_file_of_world_size_4_on_2_nodes(faults):
    launch, codes = faults
    assert codes == [0, 0], launch.logs()
    rows = launch.records()
    assert [r["impl"].rpartition(":")[2] for r in rows] == [
        "reference", "correct", "killed_on_node_1", "hangs_on_node_1", "wrong_on_node_1"
    ]  # fmt: skip
    for r in rows:
        assert (r["world_size"], r["nodes"], r["ranks_per_node"], r["launcher"]) == (4, 2, 2, "torchrun")
        assert len(r["hosts"]) == 2
        assert r["topology"]["name"].endswith("@2")  # a one-node topology joined twice: the job's two nodes
    assert not list(launch.tmp.glob("out*/**/results.jsonl"))[1:]  # one results file: node 1 wrote none
    assert "joined by its NICs for the job's 2 nodes" in launch.log(0)


def test_right_answers_are_timed_on_every_rank(faults):
    launch, _ = faults
    by = {r["impl"].rpartition(":")[2]: r for r in launch.records()}
    for name in ("reference", "correct"):
        assert by[name]["status"] == "correct" and by[name]["median_s"] > 0
        assert len(by[name]["timing"]["samples_s"]) == 3  # --iters 3, each the slowest rank's


def test_a_rank_killed_on_node_1_is_one_crash_recorded_and_the_job_goes_on(faults):
    launch, _ = faults
    by = {r["impl"].rpartition(":")[2]: r for r in launch.records()}
    crash = by["killed_on_node_1"]
    assert crash["status"] == "crashed"
    assert crash["message"].startswith("rank 2 (node 1,") and "SIGKILL" in crash["message"]
    assert "median_s" not in crash


def test_a_hang_on_node_1_is_a_timeout_on_every_node(faults):
    launch, _ = faults
    by = {r["impl"].rpartition(":")[2]: r for r in launch.records()}
    hang = by["hangs_on_node_1"]
    assert hang["status"] == "timeout" and "killed after 20 s" in hang["message"]


def test_a_wrong_answer_on_node_1_is_incorrect_and_never_timed(faults):
    launch, _ = faults
    by = {r["impl"].rpartition(":")[2]: r for r in launch.records()}
    wrong = by["wrong_on_node_1"]
    assert wrong["status"] == "incorrect" and "median_s" not in wrong and "timing" not in wrong


def test_nothing_of_the_launch_is_left_running(faults):
    launch, _ = faults
    assert marked(launch.mark) == []


def test_a_tensor_parallel_gemm_across_two_nodes(tmp_path):
    out = tmp_path / "out"
    launch = Launch(tmp_path, ["gemm-all-reduce", "--out", str(out), "--iters", "2", "-t", "hgx-h100-8"])
    assert launch.wait() == [0, 0], launch.logs()
    (row,) = launch.records()
    assert (row["problem"], row["status"], row["world_size"], row["nodes"]) == ("gemm-all-reduce", "correct", 4, 2)
    assert row["topology"]["name"] == "hgx-h100-8@2"
    assert marked(launch.mark) == []


def test_a_rank_whose_process_is_killed_ends_the_job_on_both_nodes_as_a_loss_not_a_timeout(tmp_path):
    # rank 2 (node 1) hangs inside the job and the test kills its pkroof process, as a lost node would: node 1's
    # agent then stops rank 3 and fails; rank 0 sees rank 2's heartbeat stop, records the failure, and every rank
    # left ends non-zero. --timeout 120 is far above the 10 s a silent rank is given: the end is the loss, not the hang.
    out = tmp_path / "out"
    args = ["all-reduce", "--size", "64K", "--out", str(out), "--timeout", "120", "--iters", "2"]
    launch = Launch(tmp_path, [*args, "--impl", f"{IMPLS}:correct", "--impl", f"{IMPLS}:waits_on_node_1"])
    started = tmp_path / "rank-2-started"
    deadline = time.monotonic() + 400
    while not started.exists() and time.monotonic() < deadline and all(p.poll() is None for p in launch.nodes):
        time.sleep(0.2)
    assert started.exists(), launch.logs()
    control = next(p for p in children(launch.nodes[1].pid) if environ(p).get("RANK") == "2")
    os.kill(control, signal.SIGKILL)
    codes = launch.wait()
    assert codes[0] != 0 and codes[1] != 0
    rows = launch.records()
    assert [r["impl"].rpartition(":")[2] for r in rows] == ["reference", "correct", "waits_on_node_1"]
    lost = rows[-1]
    # node 1's agent stops rank 3 within a heartbeat of rank 2's death: both may be named, rank 2 first. The job ended
    # by the loss, not by the hang's --timeout: that would be recorded as status "timeout", "killed after 120 s"
    named = ("rank 2 (node 1,", "ranks 2, 3 (node 1,")
    assert lost["status"] == "crashed" and lost["message"].startswith(named) and "gone" in lost["message"]
    assert any(f"the launched job ends: {n}" in launch.log(0) for n in named)
    assert marked(launch.mark) == []


def test_srun_tasks_without_torchrun_rank_0_serving_the_store(tmp_path):
    # what srun gives each task of a 2-node step of 2 tasks a node, set by hand on 4 processes of this machine: no
    # torchrun agent, so global rank 0 serves the store at MASTER_ADDR:MASTER_PORT
    port, mark = free_port(), "srun-" + os.urandom(6).hex()
    out = tmp_path / "out"
    procs = []
    for rank in range(4):
        env = os.environ | {"GLOO_SOCKET_IFNAME": "lo", "LAUNCH_TEST_MARK": mark, "OMP_NUM_THREADS": "1"}
        env["CUDA_VISIBLE_DEVICES"] = ""  # CPU ranks, on a GPU machine too
        env |= {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": "4"}
        env |= {"SLURM_LOCALID": str(rank % 2), "SLURM_NODEID": str(rank // 2)}
        env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        log = (tmp_path / f"task{rank}.log").open("w")
        args = [sys.executable, "-m", "pkroof", "profile", "all-reduce", "--size", "64K", "--out", str(out)]
        procs.append(subprocess.Popen([*args, "--iters", "2"], stdout=log, stderr=subprocess.STDOUT, env=env,
                                      cwd=tmp_path, start_new_session=True))  # fmt: skip
    try:
        codes = [p.wait(600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
    logs = "\n".join((tmp_path / f"task{r}.log").read_text()[-2000:] for r in range(4))
    assert codes == [0, 0, 0, 0], logs
    (row,) = records.read(out / "results.jsonl")[0]
    assert (row["status"], row["world_size"], row["nodes"], row["ranks_per_node"], row["launcher"]) == (
        "correct", 4, 2, 2, "srun"
    )  # fmt: skip
    assert all((tmp_path / f"task{r}.log").read_text().strip() == "" for r in (1, 2, 3))  # only rank 0 speaks
    assert marked(mark) == []
