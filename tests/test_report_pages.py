"""The report's pages against the defects a newcomer met: units of every topology number, sizes in binary units,
shapes in size order, every measured shape on its own roof, the roofline chart (FLOP/s against intensity; bandwidth
against size for a collective), CPU-rank times kept off GPU charts, duplicates resolved (the latest, and the page
says so), analytic pages without empty parts, progress while writing, parquet's hint."""

import json
import math
import re
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("plotly")

from report_cases import bound, shape  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from pkroof.cli import app  # noqa: E402
from pkroof.records.report_data import Page  # noqa: E402
from pkroof.reports import diagram, figures, frames  # noqa: E402
from pkroof.reports.render import value_text  # noqa: E402
from pkroof.rooflines.analyze import SweepPoint  # noqa: E402
from pkroof.topology import resolve  # noqa: E402

MiB, GiB = 2**20, 2**30


def _record(size: int, impl: str, median: float, *, backend: str = "nccl", date: str = "2026-12-01T10:00:00+00:00"):
    label = "small" if size == MiB else f"small size={'1 GiB' if size == GiB else '256 KiB'}"
    return {
        "schema": "pkroof.record/2",
        "problem": "all-reduce",
        "shape": label,
        "params": {"size_bytes": size},
        "impl": impl,
        "world_size": 2,
        "status": "correct",
        "median_s": median,
        "p10_s": median,
        "p90_s": median,
        "topology": {"name": "h200x2"},
        "date": date,
        "environment": {"host": "node-1", "backend": backend, "gpu": "NVIDIA H200"},
    }


def _report(tmp_path, records, name="r"):
    results = tmp_path / f"{name}.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / name
    result = CliRunner().invoke(app, ["report", str(results), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out, result


def _array(values) -> list[float]:
    """A trace's x or y as plotly writes it into the page: a list, or base64 typed data."""
    if isinstance(values, dict):
        import base64

        import numpy as np

        return list(np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]))
    return list(values)


def test_a_topology_number_of_a_dict_field_takes_its_fields_unit():
    # overlap_s holds seconds per schedule (it had been printed as 6.32e-18 TFLOP/s), peak_flops FLOP/s per dtype
    assert value_text("overlap_s", {"ce-overlap": 6.32e-6}) == "ce-overlap 6.32 µs"
    assert value_text("peak_flops", {"bf16": 989e12}) == "bf16 989 TFLOP/s"
    h200 = resolve("h200x2")
    text = value_text("collectives", h200.mechanisms["nccl"].collectives)
    assert text.count("\n") == len(h200.mechanisms["nccl"].collectives) - 1  # one line per collective, wrapped


def test_size_axes_are_labelled_in_binary_units_as_the_tables():
    axis = figures.size_axis([4096, GiB])
    assert axis["type"] == "log" and axis["tickvals"][0] == 4096 and axis["tickvals"][-1] == GiB
    assert axis["ticktext"][0] == "4 KiB" and axis["ticktext"][-1] == "1 GiB"
    assert all(math.log2(v).is_integer() for v in axis["tickvals"])


def test_every_measured_size_is_a_point_of_the_roof_and_shapes_come_in_size_order(tmp_path):
    # 1 MiB, 256 KiB and 1 GiB: the sweep (4 KiB ... 1 GiB by 4) has no 1 GiB + 256 KiB mix problem, but "1 GiB" sorts
    # before "256 KiB" as text; the table follows the size
    records = [_record(s, "reference", t) for s, t in ((GiB, 4e-3), (256 * 1024, 1e-5), (MiB, 2e-5))]
    out, _ = _report(tmp_path, records)
    page = (out / "problem-all-reduce.html").read_text()
    table = page[page.index("<h2>Implementations</h2>") : page.index("<h2>Advice</h2>")]
    shapes = re.findall(r'<td class="shape" data-sort="\d+">([^<]+)</td>', table)
    assert shapes == ["small size=256 KiB", "small", "small size=1 GiB"]
    roof = json.loads(re.search(r'Plotly.newPlot\("roofline", Object.assign\((\{.*?\}), \{config', page).group(1))
    xs = _array(next(t["x"] for t in roof["data"] if t.get("name") == "roof"))
    assert {256 * 1024, MiB, GiB} <= set(xs)  # the roof passes through each measured size


def test_the_latest_of_a_duplicate_wins_and_the_index_says_so(tmp_path):
    first = _record(MiB, "reference", 40e-6, date="2026-12-01T09:00:00+00:00")
    later = _record(MiB, "reference", 20e-6, date="2026-12-01T11:00:00+00:00")
    out, result = _report(tmp_path, [later, first])  # file order does not matter: the date does
    index = (out / "index.html").read_text()
    assert "1 record measured again later: the latest run of" in index
    assert "1 record measured again later" in result.output
    page = (out / "problem-all-reduce.html").read_text()
    assert page.count('<td class="mono impl">reference</td>') == 1 and "20 µs" in page


def test_cpu_rank_times_are_marked_and_kept_off_the_gpu_charts(tmp_path):
    records = [_record(MiB, "reference", 2e-5), _record(MiB, "pkroof-one-shot-push", 5e-3, backend="gloo")]
    out, _ = _report(tmp_path, records)
    page = (out / "problem-all-reduce.html").read_text()
    assert "1 measurement on CPU ranks (gloo) left off the charts" in page
    assert page.count('title="CPU ranks over gloo: a CPU time">CPU</span>') == 1
    for chart in ("roofline", "intensity"):
        data = json.loads(
            re.search(rf'Plotly.newPlot\("{chart}", Object.assign\((\{{.*?\}}), \{{config', page).group(1)
        )
        assert "pkroof-one-shot-push" not in {t.get("name") for t in data["data"]}
    index = (out / "index.html").read_text()
    assert 'class="pill cpu">CPU</span>' in index  # the best there is a CPU time: said so, no fraction of roof


def test_a_cpu_time_is_no_yardstick_for_a_gpu_time(tmp_path):
    from pkroof.records.evaluate import evaluate

    records = [_record(MiB, "reference", 2e-3, backend="gloo"), _record(MiB, "pkroof-one-shot-push", 1e-5)]
    shown = {r["impl"]: r for r in evaluate(records, resolve("h200x2"), log=lambda line: None).records}
    assert shown["pkroof-one-shot-push"]["speedup_vs_reference"] is None


def test_the_roofline_of_a_gemm_plots_flops_per_byte_under_its_roofs():
    gemm = bound(t_compute_s=2.5e-3, flops=2e12, hbm_bytes=1e9, link_bytes_per_rank=5e8, peak_flops=989e12,
                 hbm_bandwidth_Bps=4.8e12, link_bandwidth_Bps=450e9)  # fmt: skip
    shapes = [shape("s", gemm)]
    records = frames.records_frame([_record(MiB, "reference", 4e-3) | {"shape": "s"}])
    points = frames.intensity_frame(records, shapes)
    (p,) = points.itertuples()
    assert p.achieved_flops == pytest.approx(2e12 / 4e-3) and p.hbm_intensity == pytest.approx(2e12 / 1e9)
    assert p.link_intensity == pytest.approx(2e12 / 5e8) and p.roof_flops == pytest.approx(2e12 / 2.5e-3)
    fig = figures.intensity_figure(points, frames.shapes_frame(shapes))
    traces = {(t.name, t.xaxis): t for t in fig.data}
    hbm = traces["HBM roof", "x"]
    assert all(y == pytest.approx(x * 4.8e12) for x, y in zip(hbm.x, hbm.y, strict=True))  # intensity × bandwidth
    link = traces["link roof", "x2"]
    assert all(y == pytest.approx(x * 450e9) for x, y in zip(link.x, link.y, strict=True))
    assert set(traces["compute roof", "x"].y) == {989e12}
    ref = traces["reference", "x"]
    assert list(ref.x) == [2e12 / 1e9] and list(ref.y) == [2e12 / 4e-3]
    # a measured time is never below t_roof, so the point is under every roof at its intensity
    assert p.achieved_flops <= min(989e12, p.hbm_intensity * 4.8e12, p.link_intensity * 450e9)


def test_a_collectives_roofline_is_its_link_rate_against_size():
    sweep = tuple(SweepPoint(size_bytes=s, link_bytes=s, t_roof_s=1e-6 + s / 400e9, link_s=s / 400e9,
                             hbm_s=2 * s / 4e12, latency_s=1e-6, compute_s=0.0, predictions={})
                  for s in (4096, MiB, GiB))  # fmt: skip
    roofs = frames.bandwidth_roof_frame(sweep)
    link = roofs[roofs["series"] == "link"]
    assert list(link["Bps"]) == pytest.approx([400e9] * 3)  # link bytes / link term: the link's rate
    latency = roofs[roofs["series"] == "latency"]
    assert list(latency["Bps"]) == pytest.approx([s / 1e-6 for s in (4096, MiB, GiB)])
    sized = (shape("small", bound(params={"size": MiB})),)
    assert frames.chart_x(Page("all-reduce", "collective", "", shapes=sized, sweep=sweep)) == "size_bytes"


def test_an_analytic_page_has_no_empty_parts(tmp_path):
    out = tmp_path / "analytic"
    result = CliRunner().invoke(app, ["report", "--topology", "hgx-h100-8", "--out", str(out)])
    assert result.exit_code == 0, result.output
    index = (out / "index.html").read_text()
    assert 'id="histogram"' not in index  # no references measured: no histogram of their fractions
    page = (out / "problem-gemm-reduce-scatter.html").read_text()
    assert "<h2>Implementations</h2>" not in page and "<h2>Environment</h2>" not in page
    assert 'id="intensity"' in page and 'id="roofline"' in page  # its roofline, drawn from the model alone
    assert "hgx-h100-8: writing" in result.output  # progress while the pages are written


def test_plotly_titles_are_the_pages_own_above_each_chart(tmp_path):
    out, _ = _report(tmp_path, [_record(MiB, "reference", 2e-5)])
    page = (out / "problem-all-reduce.html").read_text()
    for chart in re.findall(r'Plotly.newPlot\("([a-z0-9-]+)", Object.assign\((\{.*?\}), \{config', page):
        assert "title" not in json.loads(chart[1])["layout"] or not json.loads(chart[1])["layout"]["title"].get("text")
    assert page.count('<h3 class="chart-title">') == 2


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    import importlib.util

    from pkroof.reports import build

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(build.importlib.util, "find_spec", lambda n, *a: None if n == "pyarrow" else find_spec(n, *a))
    with pytest.raises(ValueError, match=r"pip install 'pkroof\[parquet\]'"):
        build.export(frames.records_frame([_record(MiB, "reference", 2e-5)]), tmp_path / "x.parquet", "parquet")
    extras = Path(__file__).parents[1].joinpath("pyproject.toml").read_text()
    assert re.search(r'^parquet = \["pyarrow', extras, re.M)


def test_the_node_diagram_wraps_a_long_gpu_name_inside_its_box():
    svg = str(diagram.topology_svg(resolve("hgx-h100-8")))
    assert "NVIDIA H100 80GB HBM3" not in svg and svg.count(">NVIDIA H100 80GB<") == 8 and svg.count(">HBM3<") == 8
    one = str(diagram.topology_svg(resolve("h200x2"))).count("NVSwitch")
    assert one == 1
