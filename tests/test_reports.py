"""reports/: frames from fixed records, figures by their data, escaped HTML pages, atomic report folders."""

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("plotly")

from report_cases import advice, bound, shape  # noqa: E402

from pkroof.records.report_data import Page, Report  # noqa: E402
from pkroof.reports import build, figures, frames, html  # noqa: E402
from pkroof.rooflines.analyze import SweepPoint  # noqa: E402
from pkroof.topology import preset  # noqa: E402

HOSTILE = "<script>alert(1)</script>"
T_ROOF = 40e-6
ENV = {"gpu": "NVIDIA H200", "torch": "2.11.0", "nccl": "2.28.9", "host": "node0", "backend": "nccl"}


def _record(problem: str, impl: str, status: str, median: float | None = None, **fields) -> dict:
    """A record as profilers/run.py finish() writes it (p10/p90 at 0.9x/1.2x of the median)."""
    record = {
        "schema": "pkroof.record/1",
        "problem": problem,
        "shape": "small",
        "params": {},
        "impl": impl,
        "world_size": 2,
        "status": status,
        "t_roof_s": T_ROOF,
        "comm_bytes": 64 << 20,
        "date": "2026-12-01T10:00:00+00:00",
        "environment": ENV | {"topology": "h200x2"},
    }
    if median is not None:
        record |= {"median_s": median, "p10_s": 0.9 * median, "p90_s": 1.2 * median, "min_s": 0.85 * median}
        record["fraction_of_roofline"] = T_ROOF / median
        record["achieved_link_Bps"] = (32 << 20) / median
    return record | fields


def _records() -> list[dict]:
    return [
        _record("all-reduce", "reference", "correct", 100e-6),
        _record(
            "all-reduce",
            "custom/sm-store",
            "correct",
            50e-6,
            speedup_vs_reference=100e-6 / 50e-6,
            sm_clock_mhz=1455.0,
            power_capped=0.9,
        ),
        _record("all-reduce", "custom/tma", "incorrect", message="max abs error 3e-2 > 1e-3 on rank 1"),
        _record("all-gather", "reference", "correct", 80e-6),
        _record("all-gather", "custom/ce", "timeout", message="timed out after 60 s"),
        _record("all-gather", "custom/sm-load", "crashed", message="rank 0 exited with SIGSEGV"),
        # corrupted-looking: a time that is text, a bool fraction, a world size that is text, no environment dict
        _record("gemm-rs", "reference", "correct", median_s="fast", fraction_of_roofline=True, world_size="two")
        | {"environment": "garbage"},
    ]


def test_records_frame_one_row_per_record_with_numbers_coerced():
    frame = frames.records_frame(_records())
    assert len(frame) == 7
    assert list(frame.columns[:9]) == [
        "problem", "shape", "impl", "world_size", "nodes", "ranks_per_node", "launcher", "hosts", "status"
    ]  # fmt: skip
    # none of these records says a placement: one node of all its ranks, pkroof's own (no launcher, no hosts)
    assert list(frame["nodes"]) == [1] * 7 and list(frame["ranks_per_node"]) == list(frame["world_size"])
    assert set(frame["launcher"]) == {""} and set(frame["hosts"]) == {""}
    assert list(frame["status"]) == ["correct", "correct", "incorrect", "correct", "timeout", "crashed", "correct"]
    ref = frame.iloc[0]
    assert ref["median_s"] == 100e-6 and ref["p10_s"] == 0.9 * 100e-6 and ref["p90_s"] == 1.2 * 100e-6
    assert ref["fraction_of_roofline"] == pytest.approx(T_ROOF / 100e-6)
    assert ref["gpu"] == "NVIDIA H200" and ref["nccl"] == "2.28.9" and ref["topology"] == "h200x2"
    assert ref["date"] == "2026-12-01T10:00:00+00:00" and ref["driver"] == ""
    assert frame.iloc[1]["speedup_vs_reference"] == pytest.approx(2.0)
    failed = frame[frame["status"] != "correct"]
    assert failed["median_s"].isna().all() and failed["fraction_of_roofline"].isna().all()
    assert failed.iloc[0]["message"] == "max abs error 3e-2 > 1e-3 on rank 1"
    bad = frame.iloc[6]
    assert math.isnan(bad["median_s"]) and math.isnan(bad["fraction_of_roofline"])
    assert bad["world_size"] is pd.NA and bad["gpu"] == "" and bad["host"] == ""


def test_an_ll_kernel_and_ll_advice_show_their_protocol_beside_the_mechanism():
    ll = _record("all-reduce", "pkroof-one-shot-ll", "correct", 5e-6, mechanism="sm-store", schedule="serial",
                 protocol="ll")  # fmt: skip
    push = _record("all-reduce", "pkroof-one-shot-push", "correct", 6e-6, mechanism="sm-store", schedule="serial")
    frame = frames.records_frame([ll, push])
    assert list(frame["mechanism"]) == ["sm-store LL", "sm-store"]  # records without a protocol: simple
    ll_advice = {("all-reduce", "small", 2): advice("sm-store", "serial", 4e-6, protocol="ll")}
    index = frames.index_frame(frame, categories={"all-reduce": "collective"}, advice=ll_advice)
    assert index.iloc[0]["mechanism"] == "sm-store LL"


def test_index_frame_compares_reference_with_best_and_takes_advice_as_data():
    advised = {  # keyed by the index row it was computed for: (problem, shape, world size)
        ("all-reduce", "small", 2): advice("sm-store", "inter-sm", 45e-6, headroom=2.1, reason="r")
    }
    frame = frames.records_frame(_records())
    index = frames.index_frame(frame, categories={"all-reduce": "collective"}, advice=advised)
    assert list(index["problem"]) == ["all-gather", "all-reduce", "gemm-rs"]
    ar = index.set_index("problem").loc["all-reduce"]
    assert ar["category"] == "collective"
    assert ar["reference_fraction"] == pytest.approx(T_ROOF / 100e-6)
    assert ar["best_impl"] == "custom/sm-store" and ar["best_fraction"] == pytest.approx(T_ROOF / 50e-6)
    assert ar["headroom"] == pytest.approx(100e-6 / 50e-6)
    assert (ar["num_impls"], ar["num_failed"]) == (3, 1)
    assert (ar["mechanism"], ar["schedule"], ar["predicted_s"], ar["reason"]) == ("sm-store", "inter-sm", 45e-6, "r")
    ag = index.set_index("problem").loc["all-gather"]
    assert ag["best_impl"] == "reference" and ag["headroom"] == 1.0 and ag["num_failed"] == 2
    assert ag["mechanism"] == "" and math.isnan(ag["predicted_s"])
    gemm = index[index["problem"] == "gemm-rs"].iloc[0]
    assert gemm["best_impl"] == "" and math.isnan(gemm["reference_fraction"]) and math.isnan(gemm["headroom"])


def test_curves_frame_has_every_probe_point_and_its_bandwidth():
    topology = preset("h200x2")
    curves = frames.curves_frame(topology)
    assert len(curves) == sum(len(c.x) for c in topology.probe.curves)
    size_curve = next(c for c in topology.probe.curves if c.sweep == "size")
    rows = curves[curves["curve"] == size_curve.name]
    assert list(rows["x"]) == list(size_curve.x)
    assert list(rows["bandwidth_Bps"]) == [x / t for x, t in zip(size_curve.x, size_curve.median_s, strict=True)]
    assert list(rows["bandwidth_hi_Bps"]) == [x / t for x, t in zip(size_curve.x, size_curve.p10_s, strict=True)]
    cta_curve = next(c for c in topology.probe.curves if c.sweep == "ctas")
    rows = curves[curves["curve"] == cta_curve.name]
    assert list(rows["bandwidth_Bps"]) == [cta_curve.size_bytes / t for t in cta_curve.median_s]
    # NCCL points are link rates, nccl-tests' bus bandwidth: a ring all-gather on 2 ranks puts (n−1)/n·S = S/2
    # on the link, so its 1 GiB point is 2^29 B over its median time
    ag = next(c for c in topology.probe.curves if c.name == "nccl all-gather")
    rows = curves[curves["curve"] == ag.name]
    assert list(rows["bandwidth_Bps"])[-1] == pytest.approx(2**29 / ag.median_s[-1])
    assert frames.curves_frame(preset("hgx-h100-8")).empty


def test_model_frame_evaluates_the_topologys_own_fits():
    topology = preset("h200x2")
    model = frames.model_frame(topology, sizes=[4096, 1 << 30], ctas=[1, 8, 132])
    # NCCL fits are against one call's link bytes on 2 ranks: all-reduce (ring) 2(n−1)/n·S = S, all-gather and
    # reduce-scatter (ring) and all-to-all (n−1)/n·S = S/2, send/recv S; copies put S on the link
    link = {"nccl all-gather": 0.5, "nccl reduce-scatter": 0.5, "nccl all-to-all": 0.5}
    # a curve fitted in several regimes runs the cheapest line at each size: t = min_r(α_r + L(S)/β_r); the
    # frame holds the link rate L(S)/t, in the units of the samples
    for fit in topology.probe.fits:
        rows = model[(model["curve"] == fit.curve) & (model["sweep"] == "size")]
        scale = link.get(fit.curve, 1.0)
        regimes = [f for f in topology.probe.fits if f.curve == fit.curve]
        times = [min(f.latency_s + scale * s / f.peak_bandwidth_Bps for f in regimes) for s in (4096, 1 << 30)]
        expected = [scale * s / t for s, t in zip((4096, 1 << 30), times, strict=True)]
        assert list(rows["bandwidth_Bps"]) == pytest.approx(expected)
        ctas = model[(model["curve"] == fit.curve) & (model["sweep"] == "ctas")]
        if fit.per_cta_bandwidth_Bps is None:
            assert ctas.empty
        else:
            expected = [min(k * fit.per_cta_bandwidth_Bps, fit.peak_bandwidth_Bps) for k in (1, 8, 132)]
            assert list(ctas["bandwidth_Bps"]) == pytest.approx(expected)
    assert set(model["basis"]) == {"fit"}
    analytic = frames.model_frame(preset("hgx-h100-8"), sizes=[4096], ctas=[1])
    assert set(analytic["basis"]) == {"spec"} and not analytic.empty


def _sweep() -> tuple[SweepPoint, ...]:
    return tuple(
        SweepPoint(
            size_bytes=s,
            t_roof_s=2e-6 + s / 400e9,
            compute_s=s / 1e13,
            hbm_s=s / 4e12,
            link_s=s / 400e9,
            latency_s=2e-6,
            predictions={"nccl/serial": 10e-6 + s / 300e9, "sm-store/inter-sm": 3e-6 + s / 370e9},
        )
        for s in (1 << 20, 1 << 26, 1 << 30)
    )


def test_roofline_frame_is_long_form():
    roof = frames.roofline_frame(_sweep())
    assert len(roof) == 3 * (5 + 2)
    assert set(roof["x_kind"]) == {"size_bytes"}
    link = roof[roof["series"] == "link"]
    assert list(link["x"]) == [1 << 20, 1 << 26, 1 << 30] and list(link["kind"]) == ["term"] * 3
    assert list(link["t_s"]) == [s / 400e9 for s in (1 << 20, 1 << 26, 1 << 30)]
    assert set(roof[roof["kind"] == "prediction"]["series"]) == {"nccl/serial", "sm-store/inter-sm"}
    assert list(roof[roof["kind"] == "roof"]["series"]) == ["roof"] * 3
    by_flops = frames.roofline_frame(_sweep(), x="flops")  # a sweep of shapes without a size: against FLOPs
    assert set(by_flops["x_kind"]) == {"flops"} and set(by_flops["x"]) == {0.0}


def test_roofline_figure_draws_the_frames():
    roof = frames.roofline_frame(_sweep())
    measured = frames.records_frame(_records())
    measured = measured[measured["problem"] == "all-reduce"]
    fig = figures.roofline_figure(roof, measured, title="all-reduce")
    traces = {t.name: t for t in fig.data}
    assert set(traces) == {"roof", "compute", "HBM", "link", "latency", "nccl/serial", "sm-store/inter-sm"} | {
        "reference",
        "custom/sm-store",
    }
    link = roof[roof["series"] == "link"]
    assert list(traces["link"].x) == list(link["x"]) and list(traces["link"].y) == list(link["t_s"])
    assert traces["nccl/serial"].line.dash == "dash" and traces["roof"].line.dash == "solid"
    ref = measured[measured["impl"] == "reference"]
    assert traces["reference"].mode == "markers"
    assert list(traces["reference"].x) == list(ref["comm_bytes"]) and list(traces["reference"].y) == list(
        ref["median_s"]
    )
    assert "custom/tma" not in traces  # incorrect: no time to plot
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "(s)" in fig.layout.yaxis.title.text and "(bytes)" in fig.layout.xaxis.title.text


def test_bandwidth_figure_shows_samples_with_spread_and_the_model():
    topology = preset("h200x2")
    curves = frames.curves_frame(topology)
    model = frames.model_frame(topology, sizes=[1 << 20, 1 << 30], ctas=[1, 64, 132])
    fig = figures.bandwidth_figure(curves, model, mechanism="sm-store", sweep="ctas")
    samples = curves[(curves["mechanism"] == "sm-store") & (curves["sweep"] == "ctas")]
    (sample,) = [t for t in fig.data if t.mode == "markers"]
    assert sample.name == samples["curve"].iloc[0]
    assert list(sample.x) == list(samples["x"]) and list(sample.y) == list(samples["bandwidth_Bps"])
    assert list(sample.error_y.array) == pytest.approx(list(samples["bandwidth_hi_Bps"] - samples["bandwidth_Bps"]))
    (line,) = [t for t in fig.data if t.mode == "lines"]
    fitted = model[(model["mechanism"] == "sm-store") & (model["sweep"] == "ctas")]
    assert list(line.x) == [1, 64, 132] and list(line.y) == list(fitted["bandwidth_Bps"])
    size_fig = figures.bandwidth_figure(curves, model, mechanism="sm-store", sweep="size")
    assert size_fig.layout.xaxis.type == "log"
    assert {t.name for t in size_fig.data} == {"sm-store push", "sm-store bidirectional", "model (fit)"}


def test_fraction_histogram_has_the_references_and_a_line_at_half():
    index = frames.index_frame(frames.records_frame(_records()))
    fig = figures.fraction_histogram(index)
    assert list(fig.data[0].x) == list(index["reference_fraction"].dropna())
    (line,) = fig.layout.shapes
    assert line.x0 == line.x1 == 0.5


def _write(out: Path, records: list[dict] | None = None, pages: dict[str, Page] | None = None) -> list[Path]:
    advised = advice("sm-store", "inter-sm", 45e-6, headroom=2.1)
    all_reduce = Page(
        "all-reduce",
        "collective",
        "All-reduce of one bf16 tensor",
        command="pkroof profile",
        shapes=(shape("small", bound(t_link_s=T_ROOF, advice=advised)),),
        sweep=_sweep(),
    )
    records = records if records is not None else _records()
    report = Report(preset("h200x2"), tuple(records), {"all-reduce": all_reduce} | (pages or {}))
    return build.write_report(out, report)


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.script_srcs = [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self.hrefs.append(attrs["href"])
        if tag == "script" and "src" in attrs:
            self.script_srcs.append(attrs["src"])


def _links(text: str) -> _Links:
    parser = _Links()
    parser.feed(text)
    return parser


def test_hostile_names_are_escaped_everywhere(tmp_path):
    hostile = [
        _record(HOSTILE, "reference", "correct", 90e-6),
        _record(HOSTILE, HOSTILE, "incorrect", message=HOSTILE) | {"environment": ENV | {"host": HOSTILE}},
        _record("../../etc", "reference", "correct", 60e-6),
    ]
    pages = {HOSTILE: Page(HOSTILE, HOSTILE, HOSTILE, command=HOSTILE)}
    written = _write(tmp_path / "report", [*_records(), *hostile], pages)
    pages = [p for p in written if p.suffix == ".html"]
    assert {p.parent for p in written} == {tmp_path / "report"}  # ../../etc did not escape the folder
    for page in pages:
        text = page.read_text()
        assert HOSTILE not in text, page.name
        assert _links(text).script_srcs == ["plotly.min.js"]
        assert not re.search(r"<script[^>]*src=[\"']?https?:", text)
    hostile_page = (tmp_path / "report" / f"problem-{build.slug(HOSTILE)}.html").read_text()
    assert hostile_page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4  # title, heading, doc, impl, host, ...
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in (tmp_path / "report" / "index.html").read_text()


def test_slugs_are_safe_and_distinct():
    for name in ("../../etc", "/abs/path", ".hidden", "a b", HOSTILE, "..", "", "x" * 300):
        s = build.slug(name)
        assert re.fullmatch(r"[a-z0-9][a-z0-9._-]*", s), (name, s)
        assert len(s) <= 90
    assert build.slug("all-reduce") == "all-reduce"
    assert len({build.slug(n) for n in ("a/b", "a-b", "A-B", "a b")}) == 4


def test_index_links_point_at_written_files_and_colour_fractions(tmp_path):
    written = _write(tmp_path / "report")
    names = {p.name for p in written}
    assert {"index.html", "topology.html", "plotly.min.js"} <= names
    assert {n for n in names if n.startswith("problem-")} == {
        f"problem-{s}.html" for s in ("all-reduce", "all-gather", "gemm-rs")
    }
    for page in (p for p in written if p.suffix == ".html"):
        for href in _links(page.read_text()).hrefs:
            file, _, anchor = href.partition("#")
            file = file or page.name  # "#failed": a place on this page
            assert file in names, (page.name, href)
            assert (tmp_path / "report" / file).is_file()
            if anchor:
                assert f'id="{anchor}"' in (tmp_path / "report" / file).read_text(), (page.name, href)
    index = (tmp_path / "report" / "index.html").read_text()
    assert 'class="sortable"' in index
    assert re.search(r'class="pill poor">\s*40%', index)  # all-reduce reference: 40 µs / 100 µs
    assert re.search(r'class="pill good">\s*80%', index)  # its best: 40 µs / 50 µs
    assert re.search(r'class="pill fair">\s*50%', index)  # all-gather reference: 40 µs / 80 µs
    problem = (tmp_path / "report" / "problem-all-reduce.html").read_text()
    assert "max abs error 3e-2 &gt; 1e-3 on rank 1" in problem
    assert "sm-store / inter-sm" in problem and "2.10×" in problem
    assert re.search(r"1455 MHz\s*<span class=\"na\">\(90% power-capped\)", problem)  # the clock it ran at


def test_a_report_folder_is_replaced_whole(tmp_path):
    out = tmp_path / "report"
    _write(out)
    (out / "stale.html").write_text("from an older report")
    written = _write(out, _records()[:3])
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(p.name for p in written)
    assert not (out / "problem-all-gather.html").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no temporary or old folder left behind


def test_a_failed_build_leaves_the_previous_report(tmp_path, monkeypatch):
    out = tmp_path / "report"
    _write(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def fail(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(html, "problem_page", fail)
    with pytest.raises(RuntimeError, match="boom"):
        _write(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_a_folder_that_is_not_a_report_is_never_replaced(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a pkroof report"):
        _write(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_topology_page_for_the_measured_preset():
    topology = preset("h200x2")
    page = html.topology_page(topology)
    assert "<svg" in page and page.count(">GPU ") >= 2 and "18 × 26.6 GB/s" in page
    assert f"Health flags ({len(topology.probe.health)})" in page
    assert all(line.split(";")[0] in page for line in topology.probe.health)
    assert page.count("Plotly.newPlot") == 8  # size charts for 5 fitted mechanisms, CTA charts for 3
    assert "measured" in page and "nominal" in page
    from pkroof.rooflines.units import fmt_s

    assert all(fmt_s(f.latency_s) in page for f in topology.probe.fits)  # every fit's α, NCCL's regimes too
    regimes = sum(f.curve == "nccl all-gather" for f in topology.probe.fits)
    assert regimes == 1 or f"nccl all-gather (regime {regimes})" in page  # several regimes are told apart
    # the sustained matmul rate long GEMMs are predicted at (h200x2.json: bf16 666.0e12), beside the peak
    from pkroof.rooflines.units import fmt_flops

    assert f"<td>bf16 {fmt_flops(666.0e12)} (predictions of ops of 2 ms or more)</td>" in page


def test_the_clock_a_sustained_rate_was_measured_at_is_shown_where_the_probe_recorded_it():
    import dataclasses

    from pkroof.rooflines.units import fmt_clock, fmt_flops
    from pkroof.show import topology_text

    t = preset("h200x2")
    assert t.matmul_clock("bf16") is None  # the shipped file's sustained rate came from gemm_rates.py, no clock
    assert fmt_clock(None) == ""
    ceilings = t.probe.ceilings | {"matmul_bf16_sustained_sm_clock_mhz": 1485.0}
    ceilings |= {"matmul_bf16_sustained_power_capped": 0.978, "matmul_bf16_sm_clock_mhz": 1980.0}
    t = dataclasses.replace(t, probe=dataclasses.replace(t.probe, ceilings=ceilings))
    assert t.matmul_clock("bf16") == (1485.0, 0.978) and fmt_clock(t.matmul_clock("bf16")) == (
        " at 1485 MHz, power-capped 98%"
    )
    assert fmt_clock(t.matmul_clock("bf16", "burst")) == " at 1980 MHz" and t.matmul_clock("fp8") is None
    page = html.topology_page(t)
    assert f"<td>bf16 {fmt_flops(666.0e12)} at 1485 MHz, power-capped 98% (predictions of" in page
    text = topology_text(t)
    assert f"bf16 {fmt_flops(666.0e12)} at 1485 MHz, power-capped 98%" in text
    assert f"bf16 {fmt_flops(t.gpu.peak_flops['bf16'])} at 1980 MHz" in text


def test_topology_page_for_an_analytic_preset_without_probe():
    topology = preset("hgx-h100-8")
    page = html.topology_page(topology)
    assert "Not probed" in page and "Health flags" not in page
    assert "under continuous load" in page  # the published maximum achievable matmul rates
    assert page.count(">GPU ") == 8 and page.count(">NIC ") == topology.nic.count_per_node
    assert "4 × NVSwitch" in page and "model (spec)" in page
    assert _links(page).script_srcs == ["plotly.min.js"]


def test_export_csv_and_json_round_trip_and_parquet_needs_pyarrow(tmp_path, monkeypatch):
    frame = frames.records_frame(_records())
    csv = pd.read_csv(build.export(frame, tmp_path / "r.csv", "csv"))
    assert list(csv["impl"]) == list(frame["impl"]) and csv["median_s"].iloc[0] == 100e-6
    rows = json.loads(build.export(frame, tmp_path / "r.json", "json").read_text())
    assert len(rows) == 7 and rows[2]["status"] == "incorrect" and rows[6]["median_s"] is None
    monkeypatch.setattr(build.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="pyarrow"):
        build.export(frame, tmp_path / "r.parquet", "parquet")
    with pytest.raises(ValueError, match="csv, json, parquet"):
        build.export(frame, tmp_path / "r.xlsx", "xlsx")


def test_the_records_frame_names_the_topology_a_version_2_record_was_measured_against():
    record = _record("all-reduce", "reference", "correct") | {"topology": {"name": "hgx-h100-8", "sha256": "ab"}}
    record["environment"] = {k: v for k, v in record["environment"].items() if k != "topology"}
    assert frames.records_frame([record]).iloc[0]["topology"] == "hgx-h100-8"
