"""The fault matrix, continued: a problem file that misbehaves while imported or analysed, bad options, topology and
results files, exports and terminals: one line (exit 2) or a recorded status, nothing lost, nothing left running."""

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from faults_common import (  # noqa: E402, F401 (pids: the fixture that checks no PID a case named is left)
    DATA,
    HANG_S,
    HOSTILE,
    PROBLEM,
    _profile,
    _seed,
    pids,
)
from hostile_problems import SOURCES  # noqa: E402

from pkroof.profilers.profile import profile, topology_ref  # noqa: E402
from pkroof.records import format as records  # noqa: E402
from pkroof.topology import resolve  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="checks processes through /proc")


# --- a problem file that misbehaves while imported or analysed: one line, exit 2, nothing left ------------------------

BOUND_FAILS = {
    "loops_at_import": "analysing {path}: stopped after",
    "sleeps_at_import": "analysing {path}: stopped after",
    "exits_0_at_import": "analysing {path}: its process exited (code 0) before returning a result",
    "system_exit_at_import": "{path}: exited while it was imported (SystemExit: 0)",
    "system_exit_3_at_import": "{path}: exited while it was imported (SystemExit: 3)",
    "keyboard_interrupt_at_import": "analysing {path}: KeyboardInterrupt",
    "segfaults_at_import": "analysing {path}: its process was killed by SIGSEGV (code -11)",
    "forks_a_daemon_at_import": "analysing {path}: stopped after",
    "escapes_at_import": "{path}: cannot import it (RuntimeError: red gone)",
    "reference_hangs_when_traced": "analysing {path}: stopped after",
    "workload_hangs": "analysing {path}: stopped after",
    "workload_is_a_dict": "{path}: workload() returned dict, not a pkroof.rooflines.Workload",
    "workload_is_empty": "{path}: workload(): the workload has nothing to bound (no communication, no FLOPs",
    "workload_has_nan": "{path}: workload(): workload hbm_bytes must be a finite number ≥ 0, got nan",
    "workload_negative_flops": "{path}: workload(): compute op 'mm': flops must be a finite number ≥ 0, got -1",
}


def _one_line(result: subprocess.CompletedProcess) -> str:
    err = result.stderr.strip()
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert len(err.splitlines()) == 1 and err.startswith("pkroof: "), err
    assert "\x1b" not in err and "\x07" not in err
    return err.removeprefix("pkroof: ")


@pytest.mark.parametrize("command", ["bound", "advise"])
@pytest.mark.parametrize("case", sorted(BOUND_FAILS))
def test_a_problem_file_that_misbehaves_is_one_line_for_bound_and_advise(case, command, tmp_path, pids):
    if command == "advise" and case not in ("loops_at_import", "exits_0_at_import", "workload_is_empty"):
        pytest.skip("advise takes the same path as bound: three cases suffice")
    path = tmp_path / f"{case}.py"
    path.write_text(SOURCES[case])
    err = _one_line(_cli(command, str(path), "-t", "h200x2", "-n", "2", "--timeout", "3"))
    assert err.startswith(BOUND_FAILS[case].format(path=path)), err
    if "stopped after" in err:
        assert "(the limit is 3 s: --timeout)" in err


@pytest.mark.parametrize("case", ["loops_at_import", "exits_0_at_import", "reference_hangs_when_traced"])
def test_a_problem_file_that_misbehaves_while_prepared_for_profile_is_one_line_and_nothing_is_lost(
    case, tmp_path, pids
):
    path = tmp_path / f"{case}.py"
    path.write_text(SOURCES[case])
    out = tmp_path / "out"
    seeded = _seed(out, problem=str(path), params={"n": 64})
    result = _cli("profile", str(path), "-n", "2", "--out", str(out), "--timeout", "3")
    assert _one_line(result).startswith(f"preparing {case}.py: ")
    assert records.read(out / "results.jsonl")[0] == [seeded | {"schema": records.SCHEMA}]


def test_inputs_that_hang_in_the_ranks_are_a_timeout_record(tmp_path, pids):
    path = tmp_path / "inputs_hang.py"
    path.write_text(SOURCES["inputs_hang"])
    written, _ = _profile(tmp_path / "out", [], timeout_s=HANG_S, problem=str(path))
    record = written[0]
    assert record["status"] == "timeout" and record["impl"] == "reference"
    assert record["message"].startswith(f"killed after {HANG_S} s while drawing inputs (check 1 of 3)")


# --- bad options, results and topology files: one line, before anything runs ----------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    """`pkroof ARGS` run in this process (typer's runner): its exit code, stdout and stderr. The ranks and the
    processes a problem file is analysed in come from this process's fork server, as they would from pkroof's."""
    from typer.testing import CliRunner

    from pkroof.cli import app

    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def test_profile_out_naming_an_existing_file_is_refused_before_any_rank_starts(tmp_path, pids):
    existing = tmp_path / "results"
    existing.write_text("my notes\n")
    err = _one_line(_cli("profile", PROBLEM, "-n", "2", "--out", str(existing)))
    assert err == f"--out {existing}: {existing} exists and is not a folder (--out names a folder)"
    assert existing.read_text() == "my notes\n"
    inside = existing / "deeper"
    assert _one_line(_cli("profile", "all-reduce", "--out", str(inside))).startswith(f"--out {inside}: {existing}")


def _topology_text() -> str:
    from pkroof.topology import dumps

    return dumps(resolve("h200x2"))


TOPOLOGIES = {  # what replaces '"sm_count": 132' (or the HBM bandwidth) in a copy of h200x2 → what the line says
    "400_digits": (("sm_count", "9" * 400), "gpu.sm_count: 999999999999...(400 characters) (more than 19 digits)"),
    "infinity_integer": (("sm_count", "Infinity"), "gpu.sm_count: Infinity (not a finite number)"),
    "minus_infinity": (("sm_count", "-Infinity"), "gpu.sm_count: -Infinity (not a finite number)"),
    "nan_integer": (("sm_count", "NaN"), "gpu.sm_count: NaN (not a finite number)"),
    "infinity_bandwidth": (("hbm_bandwidth_Bps", "Infinity"), "gpu.hbm_bandwidth_Bps: Infinity (not a finite"),
    "1e400_bandwidth": (("hbm_bandwidth_Bps", "1e400"), "gpu.hbm_bandwidth_Bps: 1e400 (out of range for a number)"),
    "1e30_bandwidth": (("hbm_bandwidth_Bps", "1e30"), "gpu.hbm_bandwidth_Bps: 1e+30 is beyond any machine"),
    "1e-400_bandwidth": (("hbm_bandwidth_Bps", "1e-400"), "gpu.hbm_bandwidth_Bps: must be positive, got 0.0"),
    "negative_bandwidth": (("hbm_bandwidth_Bps", "-4.8e12"), "gpu.hbm_bandwidth_Bps: must be positive"),
    "string_bandwidth": (("hbm_bandwidth_Bps", '"fast"'), "gpu.hbm_bandwidth_Bps: expected a finite number, got"),
    "fractional_count": (("sm_count", "132.5"), "gpu.sm_count: expected a whole number, got 132.5"),
    "huge_count": (("sm_count", "1e30"), "gpu.sm_count: 1e+30 is beyond any machine"),
    "repeated_key": (("sm_count", '132, "sm_count": 264'), "sm_count: the key appears twice in one object"),
}


@pytest.mark.parametrize("case", sorted(TOPOLOGIES))
def test_a_topology_with_nonsense_numbers_is_one_line_naming_the_field(case, tmp_path):
    (field, value), expected = TOPOLOGIES[case]
    text = _topology_text()
    old = next(line for line in text.splitlines() if line.strip().startswith(f'"{field}":'))
    path = tmp_path / f"{case}.json"
    path.write_text(text.replace(old, old.partition(":")[0] + ": " + value + ("," if old.endswith(",") else ""), 1))
    err = _one_line(_cli("bound", "all-reduce", "-t", str(path)))
    assert err.startswith(f"{path}: {expected}"), err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to be a topology"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested too deeply to be a topology"),
        ("[1, 2]", "topology: expected a JSON object, got list"),
        ("", "not JSON (line 1: Expecting value)"),
    ],
    ids=["deep_lists", "deep_objects", "a_list", "empty"],
)
def test_a_topology_that_is_no_topology_is_one_line(text, expected, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(text)
    assert _one_line(_cli("topology", "show", str(path))) == f"{path}: {expected}"


def test_a_topology_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b"\xff\xfe\x00{")
    assert _one_line(_cli("bound", "all-reduce", "-t", str(path))) == f"{path}: not JSON (not UTF-8 text)"


def _strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "args",
    [
        ["bound", "all-reduce", "-t", "h200x2", "--json"],
        ["bound", "gemm-reduce-scatter", "-t", "hgx-h100-8", "--json"],
        ["advise", "all-to-all", "-t", "h200x2", "--json"],
        ["topology", "show", "h200x2", "--json"],
    ],
)
def test_every_json_pkroof_prints_is_strict_json(args):
    result = _cli(*args)
    assert result.returncode == 0, result.stderr
    assert isinstance(_strict(result.stdout), dict)


def test_a_problem_with_nothing_to_bound_prints_strict_json_or_one_line(tmp_path):
    path = tmp_path / "identity.py"
    path.write_text(SOURCES["loops_at_import"].split("_say('import')")[0].replace("dist.all_reduce(out)", "pass"))
    result = _cli("bound", str(path), "-t", "h200x2", "-n", "2", "--json")
    if result.returncode == 0:
        data = _strict(result.stdout)
        assert all(not isinstance(v, float) or math.isfinite(v) for v in data.values())
    else:
        _one_line(result)


# --- results files: never run, strictly read, never lost ------------------------------------------------------------


def test_a_results_file_never_runs_the_file_a_record_names(tmp_path):
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef inputs(*a, **k): pass\ndef reference(*a): pass\n")
    record = {"problem": str(evil), "shape": "default", "params": {}, "impl": f"{evil}:fast", "world_size": 2}
    records.append(tmp_path / "results.jsonl", record | {"status": "correct", "median_s": 1e-3})
    result = _cli("report", str(tmp_path / "results.jsonl"), "-t", "h200x2", "--out", str(tmp_path / "report"))
    assert not marker.exists()  # whatever the report made of it, the file it names never ran
    assert result.returncode in (0, 2)


def test_records_of_an_unknown_schema_and_a_cut_line_are_skipped_in_one_line_each_and_resume_goes_on(tmp_path, pids):
    out = tmp_path / "out"
    results = out / "results.jsonl"
    seeded = _seed(out)
    with results.open("a") as f:
        f.write(json.dumps(seeded | {"schema": "pkroof.record/99", "impl": "future"}) + "\n")
        f.write('{"problem": "cut mid-wri')  # the line a crash cut short
    lines: list[str] = []
    profile([PROBLEM], impls=[f"{HOSTILE}:raises"], world_size=2, shape=None, overrides={}, out_dir=out,
            timeout_s=60, resume=True, topology="h200x2", log=lines.append)  # fmt: skip
    assert sum("skipped, not a record" in line for line in lines) == 2
    assert any("schema 'pkroof.record/99' is not one this pkroof reads" in line for line in lines)
    stored = records.read(results)[0]
    assert [r["impl"].rpartition(":")[2] for r in stored] == ["reference", "raises"]  # the reference was reused


def test_resume_does_not_reuse_records_measured_against_another_topology(tmp_path, pids):
    out = tmp_path / "out"
    _seed(out, topology="hgx-h100-8")
    lines: list[str] = []
    written = profile([PROBLEM], impls=[], world_size=2, shape=None, overrides={}, out_dir=out, timeout_s=60,
                      resume=True, topology="h200x2", log=lines.append)  # fmt: skip
    assert [r["impl"] for r in written] == ["reference"]  # measured again, on this topology
    assert written[0]["topology"] == topology_ref(resolve("h200x2"))
    assert any("measured against another topology than h200x2" in line for line in lines)
    assert len(records.read(out / "results.jsonl")[0]) == 2  # the other topology's record is kept, not reused


def test_one_implementation_reached_by_two_spellings_of_its_path_is_profiled_once(tmp_path, pids, monkeypatch):
    monkeypatch.chdir(DATA)
    spellings = ["hostile.py:raises", "./hostile.py:raises", f"{DATA}/../problems/hostile.py:raises"]
    lines: list[str] = []
    written = profile(["user_gemm_all_reduce.py", "./user_gemm_all_reduce.py"], impls=spellings, world_size=2,
                      shape=None, overrides={}, out_dir=tmp_path, timeout_s=60, resume=False, topology="h200x2",
                      log=lines.append)  # fmt: skip
    assert [(r["problem"], r["impl"]) for r in written] == [
        (PROBLEM, "reference"),
        (PROBLEM, f"{os.path.realpath(HOSTILE)}:raises"),
    ]


# --- exports, terminals and report folders ------------------------------------------------------------------------


def _measured(tmp_path: Path, impl: str = "mine") -> Path:
    results = tmp_path / "results.jsonl"
    base = {"problem": "all-reduce", "shape": "small", "params": {"size_bytes": 2**20}, "world_size": 2}
    env = {"backend": "gloo", "host": '=HYPERLINK("http://x")'}
    for name in ("reference", impl):
        records.append(results, base | {"impl": name, "status": "correct", "median_s": 1e-3, "environment": env})
    return results


def test_a_csv_export_never_overwrites_a_file_unasked_and_neutralises_formulas(tmp_path):
    results = _measured(tmp_path, impl="=cmd|' /C calc'!A0")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "results.csv").write_text("my own numbers\n")
    args = ["report", str(results), "--format", "csv", "--out", str(folder)]
    err = _one_line(_cli(*args))
    assert err == f"{folder / 'results.csv'}: exists; not overwriting it (--force replaces it, or choose another --out)"
    assert (folder / "results.csv").read_text() == "my own numbers\n"
    forced = _cli(*args, "--force")
    assert forced.returncode == 0, forced.stderr
    import csv

    rows = list(csv.DictReader((folder / "results.csv").open()))
    assert {r["impl"] for r in rows} == {"reference", "'=cmd|' /C calc'!A0"}
    cells = [v for r in rows for v in r.values() if v]
    assert not any(v.startswith(("=", "+", "@", "\t", "\r")) for v in cells)
    assert not any(v.startswith("-") and not _is_number(v) for v in cells)
    assert [p.name for p in folder.iterdir()] == ["results.csv"]  # no temporary file left beside it


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_a_json_export_is_strict_json_and_refuses_to_overwrite_too(tmp_path):
    results = _measured(tmp_path)
    out = tmp_path / "export"
    first = _cli("report", str(results), "--format", "json", "--out", str(out))
    assert first.returncode == 0, first.stderr
    rows = _strict((out / "results.json").read_text())
    assert isinstance(rows, list) and len(rows) == 2
    assert _one_line(_cli("report", str(results), "--format", "json", "--out", str(out))).endswith(
        "exists; not overwriting it (--force replaces it, or choose another --out)"
    )


def test_a_message_with_terminal_escapes_is_printed_without_them(tmp_path, pids):
    out = tmp_path / "out"
    _seed(out)
    result = _cli("profile", PROBLEM, "--impl", f"{HOSTILE}:raises_with_escapes", "-n", "2", "--out", str(out),
                  "--resume")  # fmt: skip
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if "crashed" in line)
    assert "RuntimeError: red title cleared evildone" in row
    assert not any(c in row for c in "\x1b\x07\x08\r\u202e")
    stored = records.read(out / "results.jsonl")[0][-1]
    assert "\x1b[31m" in stored["message"]  # the record keeps what was said; only the terminal is spared


def test_report_out_through_a_symlink_replaces_the_report_and_leaves_no_stray_link(tmp_path):
    results = _measured(tmp_path)
    real = tmp_path / "reports" / "real"
    first = _cli("report", str(results), "--out", str(real))
    assert first.returncode == 0, first.stderr
    link = tmp_path / "latest"
    link.symlink_to(real)
    again = _cli("report", str(results), "--out", str(link))
    assert again.returncode == 0, again.stderr
    assert link.is_symlink() and (link / "index.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "reports", "results.jsonl"]
    assert [p.name for p in real.parent.iterdir()] == ["real"]


def test_hostile_strings_in_records_are_escaped_in_the_html(tmp_path):
    script = "<script>alert(1)</script>"
    results = _measured(tmp_path, impl=f"{script}.py:f")
    out = tmp_path / "report"
    result = _cli("report", str(results), "--out", str(out))
    assert result.returncode == 0, result.stderr
    pages = "".join(p.read_text() for p in out.rglob("*.html"))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages or "\\u003cscript" in pages
    assert script not in pages


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["bound", "{tmp}/notes.txt"],
            "{tmp}/notes.txt: not a problem file (a problem is a Python file",
        ),
        (
            ["bound", "{tmp}/folder.py"],
            "{tmp}/folder.py: not a problem file (a problem is a Python file",
        ),
        (["bound", "{tmp}/missing.py"], "{tmp}/missing.py: no such problem file"),
        (["profile", "all-reduce", "--impl", "{tmp}/notes.txt:f"], "unknown implementation '{tmp}/notes.txt:f'"),
        (["profile", "all-reduce", "--impl", "{tmp}/folder.py:f"], "implementation file {tmp}/folder.py is not a file"),
        (["profile", "all-reduce", "--impl", "{tmp}/impl.py:not-a-name"], "unknown implementation '{tmp}/impl.py:not"),
        (["bound", "{tmp}/impl.py", "--timeout", "0"], "--timeout must be a positive number of seconds, got 0"),
        (["bound", "{tmp}/impl.py", "--timeout", "nan"], "--timeout must be a positive number of seconds, got nan"),
        (["profile", "all-reduce", "--timeout", "inf"], "timeout must be a positive number of seconds, got inf"),
    ],
    ids=["text", "folder", "missing", "impl-text", "impl-folder", "impl-name", "timeout-0", "timeout-nan", "inf"],
)
def test_a_path_or_limit_that_is_no_such_thing_is_one_line_before_anything_runs(args, expected, tmp_path):
    (tmp_path / "notes.txt").write_text("def inputs(): pass\n")
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "impl.py").write_text("def f(x):\n    return x\n")
    out = ["--out", str(tmp_path / "out")] if args[0] == "profile" else ["-t", "h200x2"]
    err = _one_line(_cli(*[a.format(tmp=tmp_path) for a in args], *out))
    assert err.startswith(expected.format(tmp=tmp_path)), err
    assert not (tmp_path / "out").exists()
