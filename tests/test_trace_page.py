"""The trace page (reports/trace_page.py, reports/trace_figures.py): its figures' data against derivations from the
frames, its links, its escaping; and the page in a real browser (headless Chromium, as tests/test_report_browser.py
does the report's pages), skipped without Chromium."""

import dataclasses
import json
import re
import shutil

import pandas as pd
import pytest
from trace_frames import two_rank_job

from pkroof.reports import trace_figures
from pkroof.reports.trace_page import trace_page, write_trace_page
from pkroof.runs import analyze_traces, problem_files

HOSTILE = "<script>alert(1)</script>"


def _steps():
    # rank 0, step 1: wall 10, compute 6, communication 5 of which 3 exposed, idle 0.5 (so copies alone fill 0.5);
    # rank 1, step 1: wall 12, compute 8, communication 2, exposed 1, idle 3
    return pd.DataFrame(
        {
            "rank": [0, 1],
            "step": [1, 1],
            "wall_s": [10.0, 12.0],
            "compute_s": [6.0, 8.0],
            "communication_s": [5.0, 2.0],
            "exposed_communication_s": [3.0, 1.0],
            "idle_s": [0.5, 3.0],
        }
    )


def test_a_steps_parts_add_up_to_its_wall_time():
    (row,) = trace_figures.step_parts(_steps()).to_dict("records")
    # per rank: overlapped = comm − exposed (2, 1); compute alone = compute − overlapped (4, 7);
    # copies alone = wall − compute − exposed − idle (0.5, 0); then the mean over the two ranks
    assert row["overlapped_s"] == (2 + 1) / 2
    assert row["compute_only_s"] == (4 + 7) / 2
    assert row["exposed_s"] == (3 + 1) / 2
    assert row["copy_only_s"] == (0.5 + 0) / 2
    assert row["idle_s"] == (0.5 + 3) / 2
    parts = sum(row[c] for c, _, _ in trace_figures.STEP_PARTS)
    assert parts == pytest.approx(row["wall_s"]) and row["wall_s"] == (10 + 12) / 2


def test_the_step_figure_stacks_the_parts():
    fig = trace_figures.step_figure(trace_figures.step_parts(_steps()))
    assert fig.layout.barmode == "stack"
    assert [t.name for t in fig.data] == ["compute", "overlapped comm", "exposed comm", "copies, memsets", "idle"]
    assert [t.y[0] for t in fig.data] == [5.5, 1.5, 2.0, 0.25, 1.75]  # the derivation above
    assert list(fig.data[0].x) == ["step 1"]


def _kernels():
    rows = [  # name, category, duration (µs), its roof (s)
        ("gemm_a", "gemm", 100.0, 80e-6),
        ("gemm_a", "gemm", 300.0, 80e-6),
        ("nccl_ar", "communication", 200.0, 50e-6),
        ("elementwise", "memory", 50.0, float("nan")),
    ]
    frame = pd.DataFrame(rows, columns=["name", "category", "dur_us", "t_roof_s"])
    frame["fraction_of_roof"] = frame["t_roof_s"] / (frame["dur_us"] * 1e-6)
    return frame.assign(busbw_GBps=[float("nan"), float("nan"), 100.0, float("nan")])


def test_top_kernels_by_time_with_a_time_weighted_fraction_of_roof():
    top = trace_figures.top_kernels(_kernels())
    assert list(top["name"]) == ["gemm_a", "nccl_ar", "elementwise"]  # 400, 200, 50 µs
    gemm = top.iloc[0]
    assert gemm["time_s"] == pytest.approx(400e-6) and gemm["count"] == 2
    assert gemm["fraction_of_roof"] == pytest.approx((80e-6 + 80e-6) / 400e-6)  # Σ roof / Σ time, not a mean
    assert gemm["worst_fraction"] == pytest.approx(80e-6 / 300e-6)
    assert pd.isna(top.iloc[2]["fraction_of_roof"])  # no roof: no fraction, not 0


def test_the_kernel_figure_colours_by_category_most_time_on_top():
    fig = trace_figures.kernel_figure(trace_figures.top_kernels(_kernels()))
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"gemm", "communication", "memory"}
    assert by_name["gemm"].marker.color == trace_figures.CATEGORY_COLOURS["gemm"]
    assert list(by_name["gemm"].y) == ["3. elementwise", "2. nccl_ar", "1. gemm_a"]  # plotly draws bottom up
    assert by_name["gemm"].x[2] == pytest.approx(0.4) and pd.isna(by_name["gemm"].x[0])


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A two-rank job's traces (trace_frames.two_rank_job) analysed, with the opportunities' problem files."""
    folder = tmp_path_factory.mktemp("trace")
    result = analyze_traces(two_rank_job(folder, hostile=HOSTILE), topology="hgx-h100-8")
    out = folder / "out"
    result = dataclasses.replace(result, opportunities=problem_files.write(result.opportunities, out))
    return result, write_trace_page(result, out)


def test_the_page_links_each_problem_file_relative_to_itself(traced):
    result, page = traced
    text = page.read_text()
    files = [f for f in result.opportunities["problem_file"] if f]
    assert files
    for f in files:
        relative = f"problems/{f.rpartition('/')[2]}"
        assert f'href="{relative}"' in text and (page.parent / relative).is_file()


def test_hostile_names_are_only_text(traced):
    _, page = traced
    text = page.read_text()
    assert HOSTILE not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_a_result_without_steps_or_opportunities_still_renders():
    empty = dataclasses.make_dataclass("Empty", [])()
    text = trace_page(empty)
    assert "No ProfilerStep#N spans" in text and "None: no collective is far below its roof" in text


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)")
@pytest.mark.parametrize("width", [1400, 390])
def test_the_page_in_a_browser(traced, width, tmp_path):
    from test_report_browser import SCREENSHOTS, _chromium, _wrapper

    _, page = traced
    dom = _chromium(_wrapper(page, width, tmp_path).as_uri(), tmp_path / "profile", width, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and ("Uncaught" in line or "ERROR" in line)]
    assert errors == []
    found = re.search(r'<pre id="out">(.*?)</pre>', dom.stdout, re.S)
    assert found and found.group(1), "the measuring script did not run"
    m = json.loads(found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    assert m["charts"] == 2 and m["drawn"] >= 2  # the step breakdown and the kernels' fraction of roof, drawn
    assert m["traces"] >= 5 + 2  # five parts of a step; gemm and communication bars
    assert m["plotly_titles"] == 0
    assert m["page_width"] <= m["window_width"] + 1  # wide tables scroll inside their box
    assert all(t["scrolls"] or t["fits"] for t in m["tables"])
    assert not m["script_alert"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"trace-{width}.png"
    taken = _chromium(_wrapper(page, width, tmp_path).as_uri(), tmp_path / "profile2", width, f"--screenshot={shot}")
    assert taken.returncode == 0 and shot.stat().st_size > 10_000
