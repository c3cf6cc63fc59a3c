"""records/report_inputs.py and pkroof/report.py from fixed records, no torch: each index row advised at its own
shape and world size, exports of what the report shows, and user errors as one line with nothing written."""

import html
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("plotly")

from bound_cases import build
from typer.testing import CliRunner

from pkroof.cli import app
from pkroof.records.report_inputs import recorded_dir
from pkroof.rooflines import bound
from pkroof.topology import preset

KiB, GiB = 1 << 10, 1 << 30


def _analysis(size: int, world: int, topology: str):
    """The bound and advice at this record's own size and ranks, as the report must compute them."""
    return bound(build("all-reduce", world, "bf16", size=size), preset(topology).system(world))


def _record(size: int, world: int, topology: str, impl: str = "reference") -> dict:
    """A record as pkroof profile writes it: what was measured (a median 1.5x the advice's prediction), nothing of the
    model's."""
    a = _analysis(size, world, topology)
    return {
        "schema": "pkroof.record/2",
        "problem": "all-reduce",
        "shape": f"small size={size}",
        "params": {"size_bytes": size},
        "impl": impl,
        "world_size": world,
        "status": "correct",
        "median_s": 1.5 * a.advice.t_s,
        "topology": {"name": topology},
        "environment": {"gpu": "NVIDIA H100", "host": "node-1", "backend": "nccl"},
    }


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _rows(page: str) -> list[dict]:
    """The index's problem rows: text of each cell, and the exact number behind each timed one (data-sort)."""
    body = page[page.index("<h2>Problems</h2>") :]
    body = body[body.index("<tbody>") : body.index("</tbody>")]
    out = []
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td([^>]*)>(.*?)</td>", row, re.S)
        text = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for _, c in cells]
        sort = [re.search(r'data-sort="([^"]*)"', a) for a, _ in cells]
        number = [float(m.group(1)) if m and m.group(1) else None for m in sort]
        # problem, shape, ranks, t_roof, reference, best, headroom, recommended, predicted (reports/html.py INDEX)
        out.append({"shape": text[1], "ranks": int(text[2]), "t_roof_s": number[3], "predicted_s": number[8]})
    return out


def test_each_index_row_is_advised_at_its_own_size_and_world_size(tmp_path):
    """Regression: one problem's advice was shown on every one of its rows (a 1 GiB all-reduce "predicted" at µs)."""
    rows = [(256 * KiB, 2), (GiB, 2), (GiB, 8)]  # two sizes; one size at two world sizes (same shape label)
    records = [_record(size, world, "hgx-h100-8") for size, world in rows]
    records += [_record(GiB, 2, "hgx-h100-8", impl="custom")]  # another implementation of one row
    results = _write(tmp_path / "results.jsonl", records)
    done = CliRunner().invoke(app, ["report", str(results), "--out", str(tmp_path / "r")])
    assert done.exit_code == 0, done.output
    index = {(r["shape"], r["ranks"]): r for r in _rows((tmp_path / "r" / "index.html").read_text())}
    assert set(index) == {(f"small size={size}", world) for size, world in rows}
    beta = preset("hgx-h100-8").scaleup.total_bandwidth_Bps  # per GPU per direction, nominal: above any mechanism
    for size, world in rows:
        row = index[(f"small size={size}", world)]
        own = _analysis(size, world, "hgx-h100-8")
        assert row["t_roof_s"] == pytest.approx(own.t_roof_s)
        assert row["predicted_s"] == pytest.approx(own.advice.t_s)
        assert row["predicted_s"] >= row["t_roof_s"]  # no prediction beats the roof
        # an all-reduce puts at least the buffer on each rank's link, one way (in-network reduction by the switches:
        # S; without it, 2(n-1)/n·S)
        assert row["predicted_s"] >= size / beta
    assert index[("small size=262144", 2)]["predicted_s"] < index[(f"small size={GiB}", 2)]["predicted_s"] / 100
    assert index[(f"small size={GiB}", 8)]["predicted_s"] != index[(f"small size={GiB}", 2)]["predicted_s"]

    page = (tmp_path / "r" / "problem-all-reduce.html").read_text()
    advice = page[page.index("<h2>Advice</h2>") : page.index("<h2>Environment</h2>")]
    bounds = page[page.index("<h2>Bound</h2>") : page.index("<h2>Implementations</h2>")]
    from pkroof.rooflines.units import fmt_s

    for size, world in rows:  # one row per shape in each panel, each with its own roof and prediction
        own = _analysis(size, world, "hgx-h100-8")
        rows_advice = [r for r in re.findall(r"<tr>(.*?)</tr>", advice, re.S) if f"small size={size}<" in r]
        mine = [r for r in rows_advice if f'<td class="num">{world}</td>' in r]
        assert len(mine) == 1 and fmt_s(own.advice.t_s) in mine[0]
        rows_bound = [r for r in re.findall(r"<tr>(.*?)</tr>", bounds, re.S) if f"small size={size}<" in r]
        mine = [r for r in rows_bound if f'<td class="num">{world}</td>' in r]
        assert len(mine) == 1 and fmt_s(own.t_roof_s) in mine[0]
    assert "size=262144" not in page.replace("small size=262144", "").replace("size_bytes=262144", "")


def test_a_topology_other_than_the_records_own_is_refused(tmp_path):
    results = _write(tmp_path / "h200.jsonl", [_record(GiB, 2, "h200x2")])
    refused = CliRunner().invoke(
        app, ["report", str(results), "--topology", "hgx-h100-8", "--out", str(tmp_path / "r")]
    )
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1
    assert "measured on h200x2, not hgx-h100-8" in refused.stderr and "Traceback" not in refused.output
    assert not (tmp_path / "r").exists()
    own = CliRunner().invoke(app, ["report", str(results), "--out", str(tmp_path / "own")])  # default: their own
    assert own.exit_code == 0, own.output
    assert 'href="topology.html">h200x2</a>' in (tmp_path / "own" / "index.html").read_text()
    assert "bf16 · h200x2" in (tmp_path / "own" / "problem-all-reduce.html").read_text()
    mixed = _write(tmp_path / "mixed.jsonl", [_record(GiB, 2, "h200x2"), _record(GiB, 2, "hgx-h100-8")])
    both = CliRunner().invoke(app, ["report", str(mixed), "--out", str(tmp_path / "m")])
    assert both.exit_code == 2 and "2 topologies (h200x2, hgx-h100-8)" in both.stderr and not (tmp_path / "m").exists()
    probed = _write(tmp_path / "probed.jsonl", [_record(GiB, 2, "h200x2") | {"topology": {"name": "my-node"}}])
    unnamed = CliRunner().invoke(app, ["report", str(probed), "--out", str(tmp_path / "p")])
    assert unnamed.exit_code == 2 and "'my-node', which is not a preset" in unnamed.stderr


def test_results_without_a_single_record_are_an_error_and_nothing_is_written(tmp_path):
    for name, text in (("bad.jsonl", "{not json\n"), ("empty.jsonl", ""), ("keys.jsonl", '{"problem": "x"}\n')):
        results = tmp_path / name
        results.write_text(text)
        done = CliRunner().invoke(app, ["report", str(results), "--out", str(tmp_path / "r")])
        assert done.exit_code == 2, (name, done.output)
        assert done.stderr.count("\n") == 1 and "not one result record" in done.stderr
        assert not (tmp_path / "r").exists()


def test_an_out_that_is_a_file_is_one_line_and_exit_2(tmp_path):
    results = _write(tmp_path / "results.jsonl", [_record(GiB, 2, "h200x2")])
    afile = tmp_path / "afile"
    afile.write_text("mine")
    for out, fmt in ((afile, "html"), (afile, "csv"), (afile / "sub", "html"), (afile / "sub", "json")):
        done = CliRunner().invoke(app, ["report", str(results), "--out", str(out), "--format", fmt])
        assert done.exit_code == 2, (out, fmt, done.output)
        assert done.stderr.count("\n") == 1 and "is not a folder" in done.stderr and "Traceback" not in done.output
    assert afile.read_text() == "mine"
    main = CliRunner().invoke(app, ["report", "--out", str(afile)])  # the main job too
    assert main.exit_code == 2 and "is not a folder" in main.stderr


def test_exports_without_results_are_the_shipped_records_the_report_shows(tmp_path):
    shipped = [json.loads(line) for p in sorted(recorded_dir().glob("*.jsonl")) for line in p.read_text().splitlines()]
    assert len(shipped) > 1
    done = CliRunner().invoke(app, ["report", "--format", "csv", "--out", str(tmp_path / "csv")])
    assert done.exit_code == 0, done.output
    assert done.stdout.strip().endswith(f"wrote 1 file to {tmp_path / 'csv'}")  # not "1 files"
    import pandas as pd

    csv = pd.read_csv(tmp_path / "csv" / "results.csv")
    assert len(csv) == len(shipped) and list(csv["impl"]) == [r["impl"] for r in shipped]
    done = CliRunner().invoke(app, ["report", "--format", "json", "--out", str(tmp_path / "json")])
    assert done.exit_code == 0, done.output
    rows = json.loads((tmp_path / "json" / "results.json").read_text())
    assert [(r["problem"], r["shape"]) for r in rows] == [(r["problem"], r["shape"]) for r in shipped]
    # an analytic topology has nothing measured to export: said, not an empty file
    analytic = CliRunner().invoke(
        app, ["report", "--topology", "hgx-h100-8", "--format", "csv", "--out", str(tmp_path / "a")]
    )
    assert analytic.exit_code == 2 and "nothing measured to export" in analytic.stderr and not (tmp_path / "a").exists()


def test_a_failed_export_leaves_no_folder_behind(tmp_path, monkeypatch):
    import importlib.util

    from pkroof.reports import build as report_build

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        report_build.importlib.util, "find_spec", lambda n, *a: None if n == "pyarrow" else find_spec(n, *a)
    )
    results = _write(tmp_path / "results.jsonl", [_record(GiB, 2, "h200x2")])
    out = tmp_path / "new" / "parquet"
    done = CliRunner().invoke(app, ["report", str(results), "--format", "parquet", "--out", str(out)])
    assert done.exit_code == 2 and "needs pyarrow" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl"]  # neither parquet/ nor new/


def test_one_run_of_one_problem_is_said_in_the_singular(tmp_path):
    results = _write(tmp_path / "results.jsonl", [_record(GiB, 2, "h200x2")])
    done = CliRunner().invoke(app, ["report", str(results), "--out", str(tmp_path / "r")])
    assert done.exit_code == 0, done.output
    index = (tmp_path / "r" / "index.html").read_text()
    assert "1 row (problem, shape, ranks) of 1 problem\n" in index and "1 measured run." in index
    assert "1 runs" not in index and "1 problems" not in index
