"""The report in a real browser (headless Chromium): pages load from file:// without console errors, every chart
is drawn with its traces, and a screenshot of each page type is kept in artifacts/screenshots/."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("plotly")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)")

from typer.testing import CliRunner  # noqa: E402

from pkroof.cli import app  # noqa: E402

HERE = Path(__file__).parent
SCREENSHOTS = HERE.parent / "artifacts" / "screenshots"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,2200",
    "--virtual-time-budget=15000",
]


def _chromium(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *extra, page.as_uri()]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    base = tmp_path_factory.mktemp("browser")
    problem = str(HERE / "data" / "problems" / "user_gemm_all_reduce.py")
    hostile = "<script>alert(1)</script>"

    def record(impl, median, host="node-1"):
        return {
            "problem": problem,
            "shape": "small",
            "params": {"m": 64, "n": 32, "k": 16},
            "impl": impl,
            "world_size": 2,
            "status": "correct",
            "t_roof_s": 1.4e-6,
            "comm_bytes": 8192,
            "median_s": median,
            "p10_s": median * 0.9,
            "p90_s": median * 1.1,
            "fraction_of_roofline": 1.4e-6 / median,
            "environment": {"host": host, "backend": "nccl", "gpu": "NVIDIA H200"},
            "schema": "pkroof.record/2",  # records are read strictly: a line without a schema is no record
        }

    results = base / "results.jsonl"
    results.write_text(json.dumps(record("reference", 4e-6)) + "\n" + json.dumps(record(hostile, 2e-6, hostile)) + "\n")
    out = base / "report"
    result = CliRunner().invoke(app, ["report", str(results), "--out", str(out), "--topology", "h200x2"])
    assert result.exit_code == 0, result.output
    return out


def _page(report: Path, kind: str) -> Path:
    if kind == "problem":
        return next(report.glob("problem-*.html"))
    return report / f"{kind}.html"


@pytest.mark.parametrize("kind", ["index", "problem", "topology"])
def test_page_renders_its_charts_without_console_errors(report, kind, tmp_path):
    page = _page(report, kind)
    dom = _chromium(page, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and ("Uncaught" in line or "ERROR" in line)]
    assert errors == []
    figures = len(re.findall(r'class="chart"', page.read_text()))
    drawn = len(re.findall(r'class="main-svg"', dom.stdout))
    assert figures >= 1 and drawn >= figures  # plotly drew an SVG for every figure the page holds
    assert dom.stdout.count('class="trace') >= figures  # and each has traces, not an empty frame
    assert "<script>alert(1)</script>" not in dom.stdout  # hostile strings only ever as text
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"{kind}.png"
    taken = _chromium(page, tmp_path / "profile2", f"--screenshot={shot}")
    assert taken.returncode == 0 and shot.stat().st_size > 10_000


def test_a_preset_page_of_the_main_report_finds_the_shared_plotly(tmp_path):
    out = tmp_path / "main"
    result = CliRunner().invoke(app, ["report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = out / "presets" / "hgx-h100-8" / "problem-gemm-reduce-scatter.html"
    dom = _chromium(page, tmp_path / "profile", "--dump-dom")
    errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and ("Uncaught" in line or "ERROR" in line)]
    assert errors == [] and dom.stdout.count('class="main-svg"') >= 1  # ../../plotly.min.js loaded and drew
    shot = SCREENSHOTS / "preset-problem.png"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert _chromium(page, tmp_path / "profile2", f"--screenshot={shot}").returncode == 0
