"""`pkroof report` end to end on recorded results: pages for every problem, hostile names escaped, bad lines skipped."""

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("plotly")

from typer.testing import CliRunner

from pkroof.cli import app

PROBLEM = str(Path(__file__).parent / "data" / "problems" / "user_gemm_all_reduce.py")

# run first in a child interpreter: any import of torch then fails, as on a machine without it
NO_TORCH = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] == 'torch':\n"
    "            raise ImportError('blocked ' + name)\n"
    "sys.meta_path.insert(0, Block())\n"
)


def _traced() -> dict:
    """The user problem's workload at its small shape on 2 ranks, as pkroof profile stores it with its records."""
    from pkroof.analysis.catalogue import load
    from pkroof.analysis.trace import trace_on_meta
    from pkroof.rooflines.workload import workload_to_dict

    return workload_to_dict(trace_on_meta(load(PROBLEM), 2, {"m": 64, "n": 32, "k": 16}))


WORKLOAD = _traced()


def _record(impl, status, median=None, host="node-1"):
    r = {
        "schema": "pkroof.record/2",
        "problem": PROBLEM,
        "shape": "small",
        "params": {"m": 64, "n": 32, "k": 16},
        "impl": impl,
        "world_size": 2,
        "status": status,
        "topology": {"name": "h200x2"},
        "workload": WORKLOAD,
        "environment": {"host": host, "backend": "nccl", "gpu": "NVIDIA H200", "torch": "2.11"},
    }
    if median:
        r |= {"median_s": median, "p10_s": median * 0.9, "p90_s": median * 1.1}
    return r


def test_report_from_results_with_a_corrupted_line_and_hostile_strings(tmp_path):
    results = tmp_path / "results.jsonl"
    hostile = "<script>alert(1)</script>"
    lines = [
        _record("reference", "correct", 10e-6),
        _record(hostile, "correct", 5e-6, host=hostile),
        _record("x.py:wrong", "incorrect"),
    ]
    results.write_text("\n".join(json.dumps(r) for r in lines) + "\n{not json\n")
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", str(results), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "skipped, not a record" in result.stdout  # the corrupted line is reported, the rest rendered
    pages = {p.name for p in out.iterdir()}
    assert {"index.html", "topology.html", "plotly.min.js"} <= pages
    problem_pages = [p for p in pages if p.startswith("problem-")]
    assert len(problem_pages) == 1
    text = (out / problem_pages[0]).read_text()
    assert hostile not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    index = (out / "index.html").read_text()
    assert problem_pages[0] in index


def test_report_exports_and_refuses_bad_input(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(_record("reference", "correct", 1e-5)) + "\n")
    ok = CliRunner().invoke(app, ["report", str(results), "--out", str(tmp_path / "csv"), "--format", "csv"])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "csv" / "results.csv").read_text().startswith("problem")
    missing = CliRunner().invoke(app, ["report", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "r")])
    assert missing.exit_code == 2 and "no such results file" in missing.stderr
    bad_format = CliRunner().invoke(app, ["report", str(results), "--format", "pdf"])
    assert bad_format.exit_code == 2 and "--format takes" in bad_format.stderr


def test_without_results_the_report_is_analytic_for_the_topology(tmp_path):
    out = tmp_path / "analytic"
    result = CliRunner().invoke(app, ["report", "--topology", "hgx-h100-8", "--out", str(out)])
    assert result.exit_code == 0, result.output
    pages = sorted(p.name for p in out.glob("problem-*.html"))
    assert "problem-gemm-reduce-scatter.html" in pages and len(pages) >= 20
    page = (out / "problem-gemm-reduce-scatter.html").read_text()
    assert "llama3-70b-tp8" in page or "8192" in page  # a real model's shape, not the tiny default
    assert "not measured" in page
    assert "its reference needs data to trace" in result.stdout  # MoE & co. are said to be left out, not dropped
    index = (out / "index.html").read_text()
    assert 'id="left-out"' in index and "moe-dispatch</td><td>its reference needs data to trace" in index


def test_an_analytic_report_names_each_problem_left_out_with_the_real_reason(tmp_path):
    from pkroof.analysis.catalogue import load, suite

    out = tmp_path / "nvl72"
    result = CliRunner().invoke(app, ["report", "--topology", "gb200-nvl72", "--out", str(out)])
    assert result.exit_code == 0, result.output
    gemv = load("decode-gemv-all-reduce").params("llama3-70b-tp8")
    assert gemv["in_features"] % 72 != 0  # its shape check fails before any trace could
    reason = f"at llama3-70b-tp8: in_features={gemv['in_features']} is not divisible by the world size 72"
    assert f"decode-gemv-all-reduce: left out on gb200-nvl72 ({reason})" in result.stdout
    assert "decode-gemv-all-reduce: left out on gb200-nvl72 (its reference needs data" not in result.stdout
    index = (out / "index.html").read_text()
    left = index[index.index('id="left-out"') : index.index("<h2>Pages</h2>")]
    named = re.findall(r"<tr><td>([^<]+)</td><td>", left)
    pages = {p.name for p in out.glob("problem-*.html")}
    assert f"decode-gemv-all-reduce</td><td>{reason}</td>" in left
    assert len(named) + len(pages) == len(suite()) and not {f"problem-{n}.html" for n in named} & pages
    assert f"{len(named)} problems left out" in index


def test_report_run_without_gpus_is_one_line_and_exit_2(tmp_path, monkeypatch):
    import pkroof.topology.probe as probe_module
    from pkroof.runtime.nvml import NA

    class NoGpu:
        def query(self, name, *args):
            return NA(f"{name}: NVML Shared Library Not Found")

    monkeypatch.setattr(probe_module, "Nvml", NoGpu)
    result = CliRunner().invoke(app, ["report", "--run", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2  # nothing to probe here: bad input
    assert result.stderr.count("\n") == 1 and "no NVIDIA GPU found" in result.stderr
    assert not (tmp_path / "r").exists()  # no half-made report
    assert not (tmp_path / "r-data").exists()  # nor an empty data folder


def test_recorded_results_render_without_torch(tmp_path):
    """A traced problem's records carry its workload (not the model's output), so a laptop without torch can report."""
    import subprocess
    import sys

    from pkroof.profilers.profile import profile

    profile(
        [PROBLEM],
        impls=[],
        world_size=2,
        shape=None,
        overrides={},
        out_dir=tmp_path / "res",
        timeout_s=60,
        resume=False,
        topology="h200x2",
        log=lambda m: None,
    )
    stored = json.loads((tmp_path / "res" / "results.jsonl").read_text().splitlines()[0])
    assert stored["workload"]["comm"][0]["kind"] == "all-reduce"  # the traced workload: the file's fp32 m × n output
    assert stored["workload"]["comm"][0]["size_bytes"] == 64 * 32 * 4
    assert not {"analysis", "t_roof_s", "predicted_s", "fraction_of_roofline"} & set(stored)
    code = (
        NO_TORCH + "from pathlib import Path\n"
        "from pkroof.report import report\n"
        f"results = Path({str(tmp_path / 'res' / 'results.jsonl')!r})\n"
        f"report([results], topology='h200x2', out=Path({str(tmp_path / 'r')!r}))\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert any(p.name.startswith("problem-") for p in (tmp_path / "r").iterdir())


def _links_resolve(root: Path) -> None:
    import re

    for page in root.rglob("*.html"):
        for href in re.findall(r'href="([^"#]+)"', page.read_text()):
            assert (page.parent / href).resolve().exists(), (page, href)


def test_the_main_job_renders_h200x2_and_every_other_preset(tmp_path):
    out = tmp_path / "main"
    result = CliRunner().invoke(app, ["report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    from pkroof.topology import PRESETS

    assert {p.name for p in (out / "presets").iterdir()} == {n for n in PRESETS if n != "h200x2"}
    assert len(list(out.rglob("plotly.min.js"))) == 1  # one copy, shared by the preset pages
    sub = (out / "presets" / "hgx-b200-8" / "index.html").read_text()
    assert 'src="../../plotly.min.js"' in sub
    assert 'href="presets/hgx-b200-8/index.html"' in (out / "index.html").read_text()
    _links_resolve(out)
    from pkroof.analysis.catalogue import suite

    for name in PRESETS:  # every suite problem has a page on each preset, or is named there with its reason
        folder = out if name == "h200x2" else out / "presets" / name
        index = (folder / "index.html").read_text()
        named = (
            re.findall(r"<tr><td>([^<]+)</td><td>", index[index.find('id="left-out"') :]) if name != "h200x2" else []
        )
        assert len(named) + len(list(folder.glob("problem-*.html"))) == len(suite()), name
        assert not named or f"{name}: {len(named)} of {len(suite())} problems left out" in result.stdout


def test_each_index_row_is_advised_at_its_own_size_when_computed_from_the_records(tmp_path):
    """The report bounds each (shape, world size) at its own parameters."""
    from pkroof.topology import preset

    sizes = (256 << 10, 1 << 30)
    lines = []
    for size in sizes:
        r = _record("reference", "correct", 1e-3) | {"problem": "all-reduce", "shape": f"small size={size}"}
        del r["workload"]  # a suite problem with a hand-written workload: the catalogue rebuilds it
        lines.append(r | {"params": {"size_bytes": size}})
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["report", str(results), "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = (out / "problem-all-reduce.html").read_text()
    advice = page[page.index("<h2>Advice</h2>") : page.index("<h2>Environment</h2>")]
    predicted = {}
    for row in re.findall(r"<tr>(.*?)</tr>", advice, re.S)[1:]:
        shape = re.search(r"<td>(small size=\d+)", row).group(1)
        t = re.findall(r'<td class="num">([\d.]+) (ns|µs|ms|s)</td>', row)[0]
        predicted[shape] = float(t[0]) * {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}[t[1]]
    assert set(predicted) == {f"small size={s}" for s in sizes}
    beta = preset("h200x2").scaleup.total_bandwidth_Bps  # nominal, per direction: no mechanism is faster
    for size in sizes:  # an all-reduce on 2 ranks puts at least the buffer on each rank's link
        assert predicted[f"small size={size}"] >= 2 * (2 - 1) / 2 * size / beta
    assert predicted[f"small size={1 << 30}"] > 100 * predicted[f"small size={256 << 10}"]


def test_the_main_job_runs_without_torch(tmp_path):
    import subprocess
    import sys

    code = (
        NO_TORCH + "import importlib.util\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'torch' else _find(name, *a)\n"
        "from pathlib import Path\n"
        "from pkroof.report import main_job\n"
        f"main_job(Path({str(tmp_path / 'm')!r}), log=print)\n"
    )
    code = code.replace("import importlib.util\n", "import importlib.util\n_find = importlib.util.find_spec\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    # the shipped records of traced problems carry their workloads, so no problem needs torch to be traced
    assert "results recorded on the 2xH200 node" in done.stdout
    pages = {p.name for p in (tmp_path / "m").glob("problem-*.html")}
    assert "problem-gemm-reduce-scatter.html" in pages and "problem-all-reduce.html" in pages
    # a traced problem's roofline over its named shapes comes from the traces the package ships
    assert '"name":"roof"' in (tmp_path / "m" / "problem-ring-attention.html").read_text()
    _links_resolve(tmp_path / "m")


def test_a_results_file_never_runs_the_problem_file_it_names(tmp_path):
    """A record names a .py problem that would write a file when imported: report, export and calibrate read the
    record, say in one line that it has no workload to bound it by, and never import the file."""
    planted = tmp_path / "planted.py"
    marker = tmp_path / "it-ran"
    planted.write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "def inputs(rank, world_size, *, seed, device, n=4):\n    return ()\n"
        "def reference(*inputs):\n    return ()\n"
    )
    record = _record("reference", "correct", 1e-5) | {"problem": str(planted), "params": {"n": 4}}
    del record["workload"]
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(record) + "\n" + json.dumps(record | {"impl": "other.py:f"}) + "\n")
    for args in (
        ["report", str(results), "--out", str(tmp_path / "r")],
        ["report", str(results), "--format", "csv", "--out", str(tmp_path / "csv")],
    ):
        done = CliRunner().invoke(app, args)
        assert done.exit_code == 0, done.output
        assert "never runs a file named in a results file" in done.output
        assert not marker.exists()
    csv = (tmp_path / "csv" / "results.csv").read_text()
    assert csv.count("planted.py") == 2  # what was measured is exported all the same, without the model's columns
    topo = tmp_path / "node.json"
    from pkroof.topology import dump, resolve

    dump(resolve("h200x2"), topo)
    CliRunner().invoke(app, ["topology", "calibrate", str(topo), str(results)])
    assert not marker.exists()
