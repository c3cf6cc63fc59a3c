"""A report shows what failed: the index row counts the failed implementations, the problem page lists each with its
reason in a table that wraps it (every table fits its columns at 1280 px, checked in headless Chromium where there is
one); a user's problem file is named by a relative or file name, never this machine's absolute path, and its page
shows its docstring, CATEGORY and SOURCE."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("plotly")

from typer.testing import CliRunner

from pkroof.cli import app

HERE = Path(__file__).parent
USER_FILE = HERE / "data" / "problems" / "user_gemm_all_reduce.py"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LONG = "RuntimeError: index 7 is out of range for a tensor of 4 rows " + "and the explanation goes on " * 12
WRONG = "trial 1: rank 0: output 0: 4094 of 4096 elements differ (max |error| 0.0383)"


def _record(problem: str, impl: str, status: str, *, median: float | None = None, message: str = "", **kw) -> dict:
    record = {
        "schema": "pkroof.record/2",
        "problem": problem,
        "shape": "small",
        "params": {},
        "impl": impl,
        "world_size": 2,
        "status": status,
        "message": message,
        "topology": {"name": "h200x2"},
        "date": "2026-12-01T10:00:00+00:00",
        "environment": {"host": "node-1", "backend": "nccl", "gpu": "NVIDIA H200"},
    }
    if median is not None:
        record |= {"median_s": median, "p10_s": 0.9 * median, "p90_s": 1.1 * median}
    return record | kw


def _report(tmp_path: Path, records: list[dict]) -> Path:
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "report"
    done = CliRunner().invoke(app, ["report", str(results), "--out", str(out), "--topology", "h200x2"])
    assert done.exit_code == 0, done.output
    return out


@pytest.fixture(scope="module")
def failures(tmp_path_factory) -> Path:
    """all-reduce: the reference and one implementation correct, one wrong, one crashed with a long reason."""
    records = [
        _record("all-reduce", "reference", "correct", median=40e-6),
        _record("all-reduce", "mine.py:good", "correct", median=30e-6),
        _record("all-reduce", "mine.py:wrong", "incorrect", message=WRONG),
        _record("all-reduce", "mine.py:crash", "crashed", message=LONG),
    ]
    return _report(tmp_path_factory.mktemp("failures"), records)


def test_the_index_row_counts_the_failed_implementations(failures):
    index = (failures / "index.html").read_text()
    failed, measured = 2, 4  # wrong + crash, of reference + good + wrong + crash
    assert re.search(rf'href="problem-all-reduce.html#failed"[^>]*>\s*{failed} of {measured} failed</a>', index)


def test_the_problem_page_lists_each_failure_with_its_whole_reason(failures):
    page = (failures / "problem-all-reduce.html").read_text()
    section = page[page.index('<h2 id="failed">') : page.index("<h2>Advice</h2>")]
    assert '<table class="failures">' in section
    cells = re.findall(r'<td class="message">(.*?)</td>', section, re.S)
    assert sorted(cells) == sorted([WRONG, LONG])  # whole, not cut short
    implementations = page[page.index("<h2>Implementations</h2>") : page.index('<h2 id="failed">')]
    assert "explanation goes on" not in implementations  # the wide table carries no reason to clip


def test_a_user_file_is_named_without_this_machines_path_and_shows_what_it_is(tmp_path, monkeypatch):
    pytest.importorskip("torch")  # its records carry the workload traced from it
    from pkroof.analysis.problem import analyze
    from pkroof.rooflines.workload import workload_to_dict

    workload = workload_to_dict(analyze(str(USER_FILE), topology="h200x2", params={}).analysis.workload)
    record = _record(str(USER_FILE), "reference", "correct", median=40e-6, workload=workload)
    monkeypatch.chdir(tmp_path)  # the file lies outside the working folder: named by its file name
    out = _report(tmp_path, [record, _record(str(USER_FILE), f"{HERE}/impls.py:fast", "crashed", message=LONG)])
    (page,) = out.glob("problem-*.html")
    assert re.fullmatch(r"problem-user_gemm_all_reduce\.py-[0-9a-f]{8}\.html", page.name)
    for written in out.glob("*.html"):
        assert str(HERE) not in written.read_text(), written.name  # no absolute path of this machine
    text = page.read_text()
    assert "<title>user_gemm_all_reduce.py" in text and "<h1>user_gemm_all_reduce.py</h1>" in text
    assert "Row-parallel linear then all-reduce, written as a user would" in text  # its docstring
    assert "<b>tp-gemm</b>" in text  # CATEGORY
    assert "NVIDIA/Megatron-LM: megatron/core/tensor_parallel/layers.py::RowParallelLinear" in text  # SOURCE
    assert "impls.py:fast" in text


MEASURE = """
const doc = document.getElementById("f").contentDocument, win = document.getElementById("f").contentWindow;
const main = doc.querySelector("main");
const tables = [...doc.querySelectorAll("main table")].map(t => t.scrollWidth <= main.clientWidth + 1);
document.getElementById("out").textContent = JSON.stringify({
  page_width: doc.documentElement.scrollWidth, window_width: win.innerWidth, tables: tables});
"""


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)")
def test_at_1280_px_every_table_of_the_problem_page_fits_its_columns(failures, tmp_path):
    page, width = failures / "problem-all-reduce.html", 1280
    wrap = tmp_path / "measure.html"
    wrap.write_text(
        '<!DOCTYPE html><html><body style="margin:0">'
        f'<iframe id="f" src="{page.as_uri()}" style="width:{width}px;height:2400px;border:0"></iframe>'
        f'<pre id="out"></pre><script>setTimeout(() => {{ {MEASURE} }}, 4000);</script></body></html>'
    )
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    args += ["--allow-file-access-from-files", "--virtual-time-budget=10000", f"--window-size={width},2400"]
    args += [f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", wrap.as_uri()]
    dom = subprocess.run(args, capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="out">(.*?)</pre>', dom.stdout, re.S)
    assert found and found.group(1), dom.stderr[-2000:]
    m = json.loads(found.group(1))
    assert m["page_width"] <= m["window_width"] + 1
    assert m["tables"] and all(m["tables"])  # no table wider than the page: nothing behind a scrollbar


def test_a_problem_of_one_size_measured_on_cpu_ranks_draws_no_empty_bandwidth_chart(tmp_path):
    """Its bandwidth roofs are lines through the sweep's sizes: one size and no GPU measurement would be a chart with
    nothing on it, so there is none (the time chart still shows the roof and predictions at that size)."""
    from pkroof.rooflines.collectives import Collective
    from pkroof.rooflines.workload import CommOp, Workload, workload_to_dict

    op = CommOp("reduce-scatter-0", Collective.REDUCE_SCATTER, 32768.0, 2)
    workload = workload_to_dict(Workload("norm", comm=(op,), hbm_bytes=49152.0, dtype="fp32", other_ops=("aten.mul",)))
    cpu = {"host": "vm", "backend": "gloo"}
    record = _record(str(tmp_path / "norm.py"), "reference", "correct", median=8e-4, workload=workload, environment=cpu)
    out = _report(tmp_path, [record])
    (page,) = out.glob("problem-*.html")
    text = page.read_text()
    assert 'id="roofline"' in text  # the time chart
    assert 'id="intensity"' not in text and "Achieved bandwidth against size" not in text
