"""The report in a real browser (headless Chromium): every page type loads from file:// without console errors, every
chart is drawn with its traces, and the layout holds at 1400 px and at a phone's 390 px (tables on screen or
scrolling inside their own box, chart titles clear of plotly's toolbar, GPU names inside the diagram's boxes). A
screenshot of each page at both widths is kept in artifacts/screenshots/. Skipped without Chromium."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("plotly")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)")

from typer.testing import CliRunner  # noqa: E402

from pkroof.cli import app  # noqa: E402
from pkroof.topology import dumps, resolve  # noqa: E402

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
    "--hide-scrollbars",
    "--allow-file-access-from-files",  # the measuring frame reads its page's DOM
    "--virtual-time-budget=15000",
]
HOSTILE = "<script>alert(1)</script>"
PAGES = {  # page type → its file in the report
    "index": "index.html",
    "problem-collective": "problem-all-reduce.html",
    "problem-gemm": "problem-gemm-reduce-scatter.html",
    "problem-user-file": None,  # the hostile user problem's page, found by glob
    "problem-analytic": "presets/hgx-h100-8/problem-gemm-all-reduce.html",  # with its crossover chart
    "problem-two-nodes": None,  # a record measured on 2 nodes: both tiers in its bound table
    "index-analytic": "presets/gb200-nvl72/index.html",
    "topology-probed": "topology.html",
    "topology-preset": "presets/hgx-h100-8/topology.html",
}
# what the frame reports of its page: console errors land in stderr; this JSON lands in the DOM
MEASURE = """
const doc = document.getElementById("f").contentDocument, win = document.getElementById("f").contentWindow;
const boxes = [...doc.querySelectorAll("svg[role=img] rect")].map(r => r.getBBox());
const inside = [...doc.querySelectorAll("svg[role=img] text")].every(t => {
  const b = t.getBBox(), c = b.x + b.width / 2, m = b.y + b.height / 2;
  const box = boxes.find(r => c >= r.x && c <= r.x + r.width && m >= r.y && m <= r.y + r.height);
  return !box || (b.x >= box.x - 1 && b.x + b.width <= box.x + box.width + 1);
});
const tables = [...doc.querySelectorAll("main table")].map(t => {
  const box = t.closest(".scroll");
  return {scrolls: !!box, fits: t.scrollWidth <= (box || doc.querySelector("main")).clientWidth + 1};
});
const out = {
  page_width: doc.documentElement.scrollWidth, window_width: win.innerWidth,
  charts: doc.querySelectorAll("div.chart").length, drawn: doc.querySelectorAll("div.chart .main-svg").length,
  traces: doc.querySelectorAll("div.chart .trace").length, plotly_titles: doc.querySelectorAll(".gtitle").length,
  labels_inside_boxes: inside, tables: tables, script_alert: doc.documentElement.innerHTML.includes("<script>alert"),
};
document.getElementById("out").textContent = JSON.stringify(out);
"""


def _wrapper(page: Path, width: int, tmp: Path) -> Path:
    wrap = tmp / f"measure-{width}.html"
    wrap.write_text(
        '<!DOCTYPE html><html><body style="margin:0">'
        f'<iframe id="f" src="{page.as_uri()}" style="width:{width}px;height:2400px;border:0"></iframe>'
        f'<pre id="out"></pre><script>setTimeout(() => {{ {MEASURE} }}, 6000);</script></body></html>'
    )
    return wrap


def _chromium(url: str, profile: Path, width: int, *extra: str) -> subprocess.CompletedProcess:
    args = [CHROMIUM, *FLAGS, f"--window-size={max(width, 500)},2400", f"--user-data-dir={profile}"]
    args += ["--enable-logging=stderr", "--v=0", *extra, url]
    return subprocess.run(args, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The main report (the shipped 2xH200 records and every preset), with a user problem file's records beside: a
    hostile implementation name and host, and one run on CPU ranks."""
    pytest.importorskip("torch")  # the user problem's records carry its workload, traced here
    base = tmp_path_factory.mktemp("browser")
    problem = str(HERE / "data" / "problems" / "user_gemm_all_reduce.py")
    from pkroof.analysis.problem import analyze
    from pkroof.rooflines.workload import workload_to_dict

    workload = workload_to_dict(analyze(problem, topology="h200x2", params={}).analysis.workload)

    def record(impl, median, backend="nccl", host="node-1"):
        return {
            "schema": "pkroof.record/2",
            "problem": problem,
            "shape": "small",
            "params": {},
            "impl": impl,
            "world_size": 2,
            "status": "correct",
            "median_s": median,
            "p10_s": median * 0.9,
            "p90_s": median * 1.1,
            "topology": {"name": "h200x2"},
            "workload": workload,
            "date": "2026-12-01T10:00:00+00:00",
            "environment": {"host": host, "backend": backend, "gpu": "NVIDIA H200"},
        }

    records = [record("reference", 40e-6), record(HOSTILE, 30e-6, host=HOSTILE), record("cpu-run", 2e-3, "gloo")]
    results = base / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    main = base / "main"
    assert CliRunner().invoke(app, ["report", "--out", str(main)]).exit_code == 0
    user = base / "user"
    done = CliRunner().invoke(app, ["report", str(results), "--out", str(user), "--topology", "h200x2"])
    assert done.exit_code == 0, done.output
    nodes = base / "nodes"
    two = {k: v for k, v in record("reference", 4e-3).items() if k != "workload"}  # a suite problem: rebuilt
    two |= {"problem": "all-reduce", "shape": "small size=1 GiB", "params": {"size_bytes": 2**30}, "world_size": 16}
    two |= {"nodes": 2, "ranks_per_node": 8, "topology": {"name": "hgx-h100-8@2"}}
    (base / "two-nodes.jsonl").write_text(json.dumps(two) + "\n")
    (base / "two-nodes.json").write_text(dumps(resolve("hgx-h100-8", nodes=2)))
    args = ["report", str(base / "two-nodes.jsonl"), "--out", str(nodes), "--topology", str(base / "two-nodes.json")]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    return main, user, nodes


def _page(report, kind: str) -> Path:
    main, user, nodes = report
    if kind == "problem-user-file":
        (page,) = user.glob("problem-*.html")  # the one problem there; its name is cut short under a long checkout path
        return page
    if kind == "problem-two-nodes":
        return nodes / "problem-all-reduce.html"
    return main / PAGES[kind]


@pytest.mark.parametrize("width", [1400, 390])
@pytest.mark.parametrize("kind", list(PAGES))
def test_a_page_renders_and_holds_its_layout(report, kind, width, tmp_path):
    page = _page(report, kind)
    dom = _chromium(_wrapper(page, width, tmp_path).as_uri(), tmp_path / "profile", width, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and ("Uncaught" in line or "ERROR" in line)]
    assert errors == []
    found = re.search(r'<pre id="out">(.*?)</pre>', dom.stdout, re.S)
    assert found and found.group(1), "the measuring script did not run"
    m = json.loads(found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    assert m["charts"] >= (0 if kind.startswith("index") else 1)
    assert m["drawn"] >= m["charts"] and m["traces"] >= m["charts"]  # plotly drew every figure, with traces
    assert m["plotly_titles"] == 0  # titles are the page's, above each chart: none under plotly's toolbar
    assert m["labels_inside_boxes"]  # the node diagram's GPU and NIC names stay inside their boxes
    assert m["page_width"] <= m["window_width"] + 1  # nothing pushes the page sideways; wide tables scroll in place
    assert all(t["scrolls"] or t["fits"] for t in m["tables"])
    if width == 1400 and kind.startswith("index"):
        assert all(t["fits"] for t in m["tables"])  # the index's columns are all on screen
    assert not m["script_alert"]  # a hostile string is only ever text
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"{kind}-{width}.png"
    wrap = _wrapper(page, width, tmp_path)
    taken = _chromium(wrap.as_uri(), tmp_path / "profile2", width, f"--screenshot={shot}")
    assert taken.returncode == 0 and shot.stat().st_size > 10_000


def test_an_analytic_index_has_no_empty_histogram(report):
    index = _page(report, "index-analytic").read_text()
    assert 'id="histogram"' not in index
    problem = _page(report, "problem-analytic").read_text()
    assert "<h2>Implementations</h2>" not in problem and "not measured here" in problem
