"""The profiler on CPU ranks over gloo: correct, wrong, unwritten, hanging and crashing implementations; resume;
a user's problem file with no hand-written workload, traced into one."""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pkroof.analysis.catalogue import load  # noqa: E402
from pkroof.analysis.trace import trace, trace_on_meta  # noqa: E402
from pkroof.profilers.profile import profile  # noqa: E402
from pkroof.records import format as records  # noqa: E402
from pkroof.records.evaluate import evaluate  # noqa: E402
from pkroof.rooflines import Collective  # noqa: E402

DATA = Path(__file__).parent / "data" / "problems"
PROBLEM = str(DATA / "user_gemm_all_reduce.py")
IMPLS = str(DATA / "impls.py")


def _read(written):
    """The records as a reader sees them: with the model's fields computed on h200x2 (records/evaluate.py)."""
    from pkroof.topology import resolve

    return evaluate(written, resolve("h200x2"), log=lambda _: None).records


def _run(tmp_path, impls, **kw):
    lines = []
    out = profile(
        [PROBLEM],
        impls=[f"{IMPLS}:{i}" for i in impls],
        world_size=2,
        shape=None,
        overrides={},
        out_dir=tmp_path,
        timeout_s=kw.get("timeout_s", 20),
        resume=kw.get("resume", False),
        topology="h200x2",
        log=lines.append,
    )
    return out, lines


def test_every_kind_of_implementation_is_recorded_and_the_run_goes_on(tmp_path):
    written, lines = _run(tmp_path, ["correct", "wrong", "unwritten", "hangs", "crashes"], timeout_s=10)
    status = {r["impl"].rpartition(":")[2]: r for r in written}
    assert status["reference"]["status"] == "correct"
    assert status["correct"]["status"] == "correct" and status["correct"]["median_s"] > 0
    assert status["wrong"]["status"] == "incorrect" and "median_s" not in status["wrong"]  # never timed
    assert status["unwritten"]["status"] == "incorrect"
    assert status["hangs"]["status"] == "timeout" and "10 s" in status["hangs"]["message"]
    # every rank hangs in the implementation's first correctness call, and the record says where
    assert "while running the implementation (check 1 of 3)" in status["hangs"]["message"]
    assert status["crashes"]["status"] == "crashed"
    assert "illegal memory access (simulated)" in status["crashes"]["message"].replace("was encountered ", "")
    assert "Traceback" in status["crashes"]["traceback"]
    stored, problems = records.read(tmp_path / "results.jsonl")
    assert problems == [] and [r["impl"] for r in stored] == [r["impl"] for r in written]
    assert all(r["schema"] == records.SCHEMA for r in stored)
    assert any("crashed" in line for line in lines)


def test_resume_skips_what_is_recorded_and_survives_a_corrupted_line(tmp_path):
    _run(tmp_path, ["correct"])
    results = tmp_path / "results.jsonl"
    with results.open("a") as f:
        f.write('{"problem": "half a line\n')
    again, lines = _run(tmp_path, ["correct", "wrong"], resume=True)
    assert [r["impl"].rpartition(":")[2] for r in again] == ["wrong"]  # the reference and correct were recorded
    assert any("skipped, not a record" in line for line in lines)
    assert sum(1 for _ in results.open()) == 4  # 2 old records, the corrupted line kept, 1 new: nothing lost


def test_a_user_problem_without_a_workload_is_traced():
    problem = load(PROBLEM)
    m, n, k = 64, 32, 16  # the "small" shape
    w = trace_on_meta(problem, 4, problem.params())
    # C[m,n] = A[m,k]·B[k,n] per rank: 2·m·n·k FLOPs in fp32, then an all-reduce of C (m·n·4 bytes) over 4 ranks
    assert w.flops_by_dtype == {"fp32": 2 * m * n * k}
    (op,) = w.comm
    assert (op.kind, op.size_bytes, op.group_size) == (Collective.ALL_REDUCE, m * n * 4, 4)
    assert op.producer == "compute"  # recorded after the matmul: the GEMM feeds the all-reduce
    assert w.hbm_bytes == 4 * (m * k + k * n + m * n)  # inputs read once, output written once


def test_value_dependent_references_are_traced_over_gloo(tmp_path):
    problem_file = tmp_path / "uneven.py"
    problem_file.write_text(
        '"""All-to-all-v whose split sizes come from the data. From nowhere in particular."""\n'
        "import torch\nimport torch.distributed as dist\n"
        'CATEGORY = "expert-parallel"\nSOURCE = "a test"\nSHAPES = {"small": dict(n=8)}\n'
        "def inputs(rank, world_size, *, seed, device, n):\n"
        "    return (torch.arange(n * world_size, dtype=torch.float32, device=device),)\n"
        "def reference(x):\n"
        "    world = dist.get_world_size()\n"
        "    splits = (x[:world] * 0 + x.numel() // world).long().tolist()  # needs the values\n"
        "    out = torch.empty_like(x)\n"
        "    dist.all_to_all_single(out, x, splits, splits)\n"
        "    return out\n"
    )
    problem = load(str(problem_file))
    with pytest.raises(Exception):  # noqa: B017 - meta tensors have no values to turn into split sizes
        trace_on_meta(problem, 2, problem.params())
    w = trace(problem, 2, problem.params())
    (op,) = w.comm
    assert (op.kind, op.size_bytes, op.group_size) == (Collective.ALL_TO_ALL, 8 * 2 * 4, 2)


def test_bad_problem_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""no reference here"""\nCATEGORY = "collective"\nSOURCE = "x"\nSHAPES = {"small": {}}\n'
        "def inputs(rank, world_size, *, seed, device):\n    return ()\n"
    )
    with pytest.raises(ValueError, match="has no function `reference`"):
        load(str(bad))
    with pytest.raises(ValueError, match="no shape 'huge'"):
        load(PROBLEM).params("huge")
    with pytest.raises(ValueError, match="has no parameter q"):
        load(PROBLEM).params(None, {"q": 1})
    with pytest.raises(ValueError, match="unknown implementation"):
        profile(
            [PROBLEM],
            impls=["fastest"],
            world_size=2,
            shape=None,
            overrides={},
            out_dir=tmp_path,
            timeout_s=5,
            resume=False,
            topology="h200x2",
            log=lambda m: None,
        )
    assert json.dumps(load(PROBLEM).params()) == json.dumps({"m": 64, "n": 32, "k": 16})


def test_torch_fast_paths_are_named_implementations_where_they_apply(tmp_path):
    from pkroof.profilers.implementations import resolve_impl

    assert callable(resolve_impl(load("all-reduce"), "torch-symm-mem-two-shot"))
    assert callable(resolve_impl(load("gemm-reduce-scatter"), "torch-fused-matmul-reduce-scatter"))
    with pytest.raises(ValueError, match="implements all-gather-gemm, not all-reduce"):
        resolve_impl(load("all-reduce"), "torch-fused-all-gather-matmul")
    lines = []
    written = profile(
        ["all-reduce"],
        impls=["torch-symm-mem-one-shot"],
        world_size=2,
        shape=None,
        overrides={},
        out_dir=tmp_path,
        timeout_s=60,
        resume=False,
        topology="h200x2",
        log=lines.append,
    )
    assert [r["impl"] for r in written] == ["reference"]  # on CPU ranks the GPU fast paths are skipped, and said so
    assert any("need GPUs" in line for line in lines)


def test_declared_pairs_get_the_models_prediction_beside_them(tmp_path):
    from pkroof.kernels.declare import declare

    with pytest.raises(ValueError):
        declare(mechanism="carrier-pigeon", schedule="serial")
    with pytest.raises(ValueError, match="protocol ll"):  # LL is modelled for serial SM-store pushes only
        declare(mechanism="sm-load", schedule="serial", protocol="ll")
    with pytest.raises(ValueError, match="protocol ll"):
        declare(mechanism="sm-store", schedule="inter-sm", protocol="ll")
    with pytest.raises(ValueError):
        declare(mechanism="sm-store", schedule="serial", protocol="ll128")
    with pytest.raises(ValueError):
        declare(mechanism="sm-store", schedule="serial", algorithm="three-shot")
    written, _ = _run(tmp_path, ["declared_pair"])
    ref, mine = written
    assert (ref["mechanism"], ref["schedule"]) == ("nccl", "serial")  # PyTorch + NCCL is the serial baseline
    assert (mine["mechanism"], mine["schedule"]) == ("sm-store", "inter-sm")
    assert "predicted_s" not in mine and "t_roof_s" not in mine  # a record holds what was measured
    _, read = _read(written)
    assert read["predicted_s"] > 0 and read["predicted_s"] >= read["t_roof_s"]  # no prediction beats the roof
    assert read["prediction_error"] is None  # CPU times are not GPU times: no error is claimed for them


def test_an_implementation_that_reports_its_comm_sms_is_predicted_at_that_count(tmp_path):
    from pkroof.analysis.problem import workload_of
    from pkroof.rooflines import Mechanism, Schedule, predict
    from pkroof.topology import resolve

    written, _ = _run(tmp_path, ["declared_pair", "reports_comm_sms"])
    declared_8, reported_12 = _read(written)[1:]
    assert declared_8["comm_sms"] == 8 and reported_12["comm_sms"] == 12  # the call's word beats the declaration
    w = workload_of(load(PROBLEM), 2, reported_12["params"])
    system = resolve("h200x2").system(2)
    at = {k: predict(w, system, Mechanism.SM_STORE, Schedule.INTER_SM, k).t_s for k in (8, 12)}
    assert at[8] != at[12]  # the count matters at this shape, so the check below can tell them apart
    assert declared_8["predicted_s"] == pytest.approx(at[8]) and reported_12["predicted_s"] == pytest.approx(at[12])


def test_finish_keeps_measurements_and_reading_derives_fraction_speedup_and_model_error():
    from pkroof.analysis.problem import analyze
    from pkroof.profilers.run import finish
    from pkroof.records.evaluate import derive
    from pkroof.rooflines import Mechanism, Schedule, predict

    result = {
        "problem": "all-reduce", "shape": "small", "params": {"size_bytes": 2**20}, "impl": "mine", "world_size": 2,
        "status": "correct", "timing": {"mode": "graph", "samples_s": [1.0e-3] * 9 + [5e-3]},
        "mechanism": "sm-store", "schedule": "serial", "comm_sms": 128,
    }  # fmt: skip
    r = finish(result, backend="nccl")
    assert r["median_s"] == 1.0e-3  # the slow outlier moves the p90, not the median
    assert not {"t_roof_s", "fraction_of_roofline", "predicted_s", "speedup_vs_reference"} & set(r)
    pa = analyze("all-reduce", topology="h200x2", params={"size_bytes": 2**20}, world_size=2)
    b = pa.bound
    predicted = predict(b.workload, b.system, Mechanism.SM_STORE, Schedule.SERIAL, 128).t_s  # the declared pair
    read = derive(r, pa, reference_s=2e-3)
    assert read["t_roof_s"] == b.t_roof_s and read["comm_bytes"] == 2**20
    assert read["fraction_of_roofline"] == pytest.approx(b.t_roof_s / 1.0e-3)
    assert read["speedup_vs_reference"] == pytest.approx(2e-3 / 1.0e-3)
    assert read["achieved_link_Bps"] == pytest.approx(b.link_bytes_per_rank / 1.0e-3)
    assert read["predicted_s"] == pytest.approx(predicted)
    assert read["prediction_error"] == pytest.approx((1.0e-3 - predicted) / predicted)


def test_graph_samples_hold_enough_back_to_back_calls():
    from pkroof.profilers.sampling import INPUT_SETS, MAX_CALLS, SAMPLE_S, calls_per_sample

    assert (SAMPLE_S, INPUT_SETS, MAX_CALLS) == (2e-3, 3, 21)  # the numbers the cases below are derived from
    assert calls_per_sample(150e-6) == 15  # ceil(2 ms / 150 µs) = 14, rounded up to a multiple of 3 input sets
    assert calls_per_sample(300e-6) == 9  # ceil(2 ms / 300 µs) = 7 -> 9
    assert calls_per_sample(5e-3) == 3  # longer than a sample: still every input set once
    assert calls_per_sample(25e-6) == 21  # 80 calls capped at 21 (a multiple of 3, as nccl-tests' 20 iterations)


HEAD = (
    '"""A user problem. From a test."""\nimport os\nimport signal\nimport torch\nimport torch.distributed as dist\n'
    'CATEGORY = "collective"\nSOURCE = "a test"\nSHAPES = {"small": dict(n=64)}\n'
    "def inputs(rank, world_size, *, seed, device, n):\n"
    "    return (torch.ones(n, dtype=torch.bfloat16, device=device),)\n"
)


def test_a_reference_that_fails_on_cpu_ranks_is_one_line_saying_why(tmp_path):
    from pkroof.analysis.trace import TraceError

    raises = tmp_path / "raises.py"  # .item() needs data: meta fails, the CPU ranks run it and it raises there
    raises.write_text(HEAD + "def reference(x):\n    if x.sum().item() > 0:\n        raise KeyError('lost')\n")
    with pytest.raises(TraceError) as e:
        trace(load(str(raises)), 2, {"n": 64})
    assert str(e.value) == f"{raises}: reference() raised KeyError: 'lost'"
    killed = tmp_path / "killed.py"  # rank 1 dies as the OOM killer kills (SIGKILL): its peer then fails too
    killed.write_text(
        HEAD + "def reference(x):\n"
        "    if x.sum().item() > 0 and dist.get_rank() == 1:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    out = x.clone()\n    dist.all_reduce(out)\n    return out\n"
    )
    with pytest.raises(TraceError) as e:
        trace(load(str(killed)), 2, {"n": 64})
    message = str(e.value)
    assert message.startswith("tracing killed at small on 2 CPU ranks was killed (SIGKILL: out of memory?)")
    assert "Tensor.item() cannot be called on meta tensors" in message and "\n" not in message


def test_flops_are_charged_at_the_problems_dtype_when_the_reference_upcasts(tmp_path):
    upcasts = tmp_path / "upcasts.py"
    upcasts.write_text(
        '"""bf16 GEMM computed in fp32. From a test."""\nimport torch\n'
        'CATEGORY = "tp-gemm"\nSOURCE = "a test"\nSHAPES = {"small": dict(m=64, n=32, k=16)}\n'
        "def inputs(rank, world_size, *, seed, device, m, n, k):\n"
        "    return torch.ones(m, k, dtype=torch.bfloat16, device=device), torch.ones(k, n, dtype=torch.bfloat16,"
        " device=device)\n"
        "def reference(a, b):\n    return (a.float() @ b.float()).to(a.dtype)\n"
    )
    m, n, k = 64, 32, 16
    w = trace_on_meta(load(str(upcasts)), 2, {"m": m, "n": n, "k": k})
    assert w.flops_by_dtype == {"bf16": 2 * m * n * k}  # the fp32 upcast is the reference's, the math is bf16's
    assert w.dtype == "bf16"
    # --dtype fp8: the bf16 inputs cast to fp8 on meta, and the same upcast matmul charged at the fp8 rate
    w = trace_on_meta(load(str(upcasts)), 2, {"m": m, "n": n, "k": k}, dtype="fp8")
    assert w.flops_by_dtype == {"fp8": 2 * m * n * k}


def test_what_an_implementation_prints_goes_to_stderr_not_into_the_table(tmp_path):
    import subprocess
    import sys

    command = [sys.executable, "-m", "pkroof", "profile", PROBLEM, "--impl", f"{IMPLS}:prints_to_stdout", "-n", "2"]
    command += ["-t", "h200x2", "--iters", "2", "--out", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "chatty rank" not in done.stdout and "chatty rank 0" in done.stderr and "chatty rank 1" in done.stderr
    assert any("prints_to_stdout" in line and "correct" in line for line in done.stdout.splitlines())


def test_resume_measures_again_what_an_older_version_of_the_problem_file_recorded(tmp_path):
    import shutil

    problem = tmp_path / "mine.py"
    shutil.copy(PROBLEM, problem)

    def run(resume: bool):
        lines: list[str] = []
        kw = dict(world_size=2, shape=None, overrides={}, out_dir=tmp_path / "out", timeout_s=20, topology="h200x2")
        return profile([str(problem)], impls=[], resume=resume, log=lines.append, **kw), lines

    first, _ = run(False)
    again, _ = run(True)
    assert len(first) == 1 and again == []  # the same file: recorded, not run again
    problem.write_text(problem.read_text() + "\n# edited: the reference may compute something else now\n")
    third, lines = run(True)
    assert [r["impl"] for r in third] == ["reference"]
    assert third[0]["problem_sha256"] != first[0]["problem_sha256"]
    assert any("its file changed since reference was recorded: measured again" in line for line in lines)
