"""The clock's cheats on 2 GPUs over NCCL (issue 25): every timed sample, eager and in CUDA graphs, runs on inputs
refilled in place and is checked after the replay; a cheat is incorrect, an honest implementation correct and timed in
graphs. For the lead's GPU run: `python -m pytest -q tests/test_faults_gpu.py` on a node with 2 GPUs."""

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pkroof.profilers.profile import profile  # noqa: E402

pytestmark = pytest.mark.multigpu

DATA = Path(__file__).parent / "data" / "problems"
PROBLEM = os.path.realpath(DATA / "user_gemm_all_reduce.py")
CHEATS = str(DATA / "cheats.py")
CHEATING = [
    "right_for_5_calls_then_zeros",
    "right_for_11_calls_then_the_last_answer",
    "cached_by_storage_pointer",
    "right_only_while_the_phase_says_check",
    "right_on_freshly_allocated_inputs",
    "wrong_on_one_rank_after_the_checks",
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-cheats")
    written = profile(
        [PROBLEM],
        impls=[f"{CHEATS}:{name}" for name in CHEATING],
        world_size=2,
        shape="wide",
        overrides={},
        out_dir=out,
        timeout_s=300,
        resume=False,
        topology="h200x2",
        log=print,
    )
    return {r["impl"].rpartition(":")[2]: r for r in written}


def test_the_reference_is_correct_and_timed_in_cuda_graphs_with_every_sample_checked(recorded):
    reference = recorded["reference"]
    assert reference["status"] == "correct", reference.get("message")
    assert reference["timing"]["mode"] == "graph" and len(reference["timing"]["samples_s"]) == 20


@pytest.mark.parametrize("impl", CHEATING)
def test_a_cheat_is_incorrect_on_gpus_naming_the_timed_sample(impl, recorded):
    record = recorded[impl]
    assert record["status"] == "incorrect" and "median_s" not in record
    assert record["message"].startswith("timed sample "), record["message"]
