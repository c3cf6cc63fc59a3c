"""Hand-off costs from profiled kernels (`pkroof topology calibrate`): which records count and what they give."""

import dataclasses
import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")  # the records' workloads are traced from the problems' references

from pkroof.analysis.catalogue import load
from pkroof.analysis.problem import workload_of
from pkroof.cli import app
from pkroof.profilers.calibrate import handoffs, overlaps
from pkroof.rooflines import Mechanism, Protocol, Schedule, predict
from pkroof.topology import dump, resolve
from pkroof.topology import load as load_topology

KIB256 = 256 * 1024


def _bare_prediction_s(mechanism: str, size: int = KIB256, protocol: Protocol = Protocol.SIMPLE) -> float:
    """What the h200x2 model predicts with no hand-off at all: the baseline a record's excess is measured from."""
    topo = resolve("h200x2")
    fields = ("handoff_s", "ll_handoff_s")
    bare = {k: dataclasses.replace(v, handoff_s=0.0, ll_handoff_s=None,
                                   sources={n: s for n, s in v.sources.items() if n not in fields})
            for k, v in topo.mechanisms.items()}  # fmt: skip
    system = dataclasses.replace(topo, mechanisms=bare).system(2)
    w = workload_of(load("all-reduce"), 2, {"size_bytes": size})
    return predict(w, system, Mechanism(mechanism), Schedule.SERIAL, 128, protocol).t_s


def _record(mechanism: str, excess_s: float, *, status: str = "correct", size: int = KIB256, ll: bool = False) -> dict:
    protocol = Protocol.LL if ll else Protocol.SIMPLE
    base = _bare_prediction_s(mechanism, size, protocol) if mechanism != "nccl" else 10e-6
    record = {
        "problem": "all-reduce", "shape": "small", "params": {"size_bytes": size}, "impl": f"x-{mechanism}-{excess_s}",
        "world_size": 2, "status": status, "mechanism": mechanism, "schedule": "serial", "comm_sms": 128,
        "median_s": base + excess_s, "schema": "pkroof.record/2",
    }  # fmt: skip
    return record | ({"protocol": "ll"} if ll else {})


def test_the_median_excess_of_small_correct_staged_records_per_mechanism():
    records = [
        _record("sm-store", 3e-6),
        _record("sm-store", 5e-6),
        _record("sm-store", 4.5e-6),  # median of 3, 4.5 and 5 µs: 4.5 µs
        _record("sm-store", 50e-6, status="incorrect"),  # never counted
        _record("sm-store", 50e-6, size=64 << 20),  # larger than max_bytes: not counted
        _record("nccl", 50e-6),  # NCCL's α holds its own synchronisation: never calibrated
        _record("sm-load", 2e-6),  # one record is not enough for a measurement
    ]
    found = {h.mechanism: h for h in handoffs(records, resolve("h200x2"), max_bytes=KIB256)}
    assert set(found) == {"sm-store"}
    assert found["sm-store"].seconds == pytest.approx(4.5e-6, abs=1e-12)
    assert len(found["sm-store"].excesses_s) == 3


def test_calibrate_writes_the_hand_offs_with_their_source_and_show_prints_them(tmp_path):
    topo_file = tmp_path / "node.json"
    dump(resolve("h200x2"), topo_file)
    results = tmp_path / "results.jsonl"
    rows = [
        _record("sm-load", 2e-6),
        _record("sm-load", 4e-6),
        _record("copy-engine", 9e-6),
        _record("copy-engine", 11e-6),
    ]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    out = CliRunner().invoke(app, ["topology", "calibrate", str(topo_file), str(results)])
    assert out.exit_code == 0, out.output
    assert "skipped, not a record" in out.output  # the bad line is reported, not fatal
    written = load_topology(topo_file)
    # medians: (2 + 4) / 2 = 3 µs for SM loads, (9 + 11) / 2 = 10 µs for the copy engine; sm-store keeps its own
    assert written.mechanisms["sm-load"].handoff_s == pytest.approx(3e-6, abs=1e-12)
    assert written.mechanisms["copy-engine"].handoff_s == pytest.approx(10e-6, abs=1e-12)
    assert written.mechanisms["sm-store"].handoff_s == resolve("h200x2").mechanisms["sm-store"].handoff_s
    source = written.mechanisms["sm-load"].sources["handoff_s"]
    assert written.sources[source].basis == "measured" and str(results) in written.sources[source].cite
    shown = CliRunner().invoke(app, ["topology", "show", str(topo_file)])
    assert "sm-load 3 µs" in shown.output and "copy-engine 10 µs" in shown.output


def test_ll_kernels_get_a_hand_off_of_their_own(tmp_path):
    # SM-store records of both protocols, each `excess` above its own protocol's model without hand-offs: the simple
    # ones' median, (3 + 5) / 2 = 4 µs, is sm-store's hand-off; the LL ones', (1 + 2) / 2 = 1.5 µs, LL's. Mixed,
    # the four would have given (2 + 3) / 2 = 2.5 µs to both.
    rows = [
        _record("sm-store", 3e-6),
        _record("sm-store", 5e-6),
        _record("sm-store", 1e-6, ll=True),
        _record("sm-store", 2e-6, ll=True),
    ]
    found = {h.label: h.seconds for h in handoffs(rows, resolve("h200x2"), max_bytes=KIB256)}
    assert found == pytest.approx({"sm-store": 4e-6, "sm-store LL": 1.5e-6}, abs=1e-12)
    topo_file, results = tmp_path / "node.json", tmp_path / "results.jsonl"
    dump(resolve("h200x2"), topo_file)
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = CliRunner().invoke(app, ["topology", "calibrate", str(topo_file), str(results)])
    assert out.exit_code == 0, out.output
    assert "sm-store LL: hand-off 1.5 µs (median of 2 records)" in out.output
    shown = CliRunner().invoke(app, ["topology", "show", str(topo_file)]).output
    assert "hand-off of an LL collective (flags inside the data), beyond α: sm-store 1.5 µs" in shown
    written = load_topology(topo_file).mechanisms["sm-store"]
    assert written.handoff_s == pytest.approx(4e-6, abs=1e-12)
    assert written.ll_handoff_s == pytest.approx(1.5e-6, abs=1e-12)
    assert written.sources["ll_handoff_s"] == written.sources["handoff_s"]  # one run, one source


def test_an_ll_hand_off_measured_at_zero_is_a_measurement_and_unknown_protocols_are_skipped(tmp_path):
    # LL records 1 and 2 µs *below* the model without hand-offs: the median excess, clipped at 0, is 0, and the
    # model must then charge LL nothing, not fall back to the simple hand-off as it does while LL's is unmeasured
    rows = [_record("sm-store", -1e-6, ll=True), _record("sm-store", -2e-6, ll=True)]
    rows.append(_record("sm-store", 50e-6, ll=True) | {"protocol": "ll128"})  # no such protocol: not counted
    topo_file, results = tmp_path / "node.json", tmp_path / "results.jsonl"
    dump(resolve("h200x2"), topo_file)
    shown = CliRunner().invoke(app, ["topology", "show", str(topo_file)]).output
    assert "beyond α: not measured, so charged the one above" in shown
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = CliRunner().invoke(app, ["topology", "calibrate", str(topo_file), str(results)])
    assert out.exit_code == 0, out.output
    assert "sm-store LL: hand-off 0 ns (median of 2 records)" in out.output
    written = load_topology(topo_file)
    store = written.mechanisms["sm-store"]
    assert store.ll_handoff_s == 0.0 and "ll_handoff_s" in store.sources  # a measured 0 cites its run
    w = workload_of(load("all-reduce"), 2, {"size_bytes": KIB256})
    ll = predict(w, written.system(2), Mechanism.SM_STORE, Schedule.SERIAL, 128, Protocol.LL).t_s
    assert ll == pytest.approx(_bare_prediction_s("sm-store", KIB256, Protocol.LL))
    assert "beyond α: sm-store 0 ns" in CliRunner().invoke(app, ["topology", "show", str(topo_file)]).output


def test_calibrate_without_usable_records_fails_in_one_line(tmp_path):
    topo_file = tmp_path / "node.json"
    dump(resolve("h200x2"), topo_file)
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(_record("nccl", 1e-6)) + "\n")
    out = CliRunner().invoke(app, ["topology", "calibrate", str(topo_file), str(results)])
    assert out.exit_code != 0
    assert "no mechanism has 2 correct serial records" in out.output


def _fused_record(schedule: str, mechanism: str, excess_s: float, tokens: int = 64, **kw) -> dict:
    """A gemm-all-reduce record `excess_s` above what h200x2 predicts for its pair without fused fixed costs."""
    topo = resolve("h200x2")
    bare = {k: dataclasses.replace(v, overlap_s={}) for k, v in topo.mechanisms.items()}
    system = dataclasses.replace(topo, mechanisms=bare).system(2)
    params = {"tokens": tokens, "in_features": 256, "out_features": 128}
    w = workload_of(load("gemm-all-reduce"), 2, params)
    comm_sms = 16 if schedule == "inter-sm" else 0
    base = predict(w, system, Mechanism(mechanism), Schedule(schedule), comm_sms).t_s
    return {
        "problem": "gemm-all-reduce", "shape": f"t{tokens}", "params": params, "impl": f"x-{schedule}-{excess_s}",
        "world_size": 2, "status": kw.get("status", "correct"), "mechanism": mechanism, "schedule": schedule,
        "comm_sms": comm_sms, "median_s": base + excess_s, "schema": "pkroof.record/2",
    }  # fmt: skip


def test_a_fused_kernels_fixed_cost_is_its_median_excess_per_mechanism_and_schedule():
    records = [
        _fused_record("inter-sm", "sm-store", 5e-6),
        _fused_record("inter-sm", "sm-store", 6e-6, tokens=128),
        _fused_record("inter-sm", "sm-store", 9e-6, tokens=256),  # median of 5, 6 and 9 µs: 6 µs
        _fused_record("inter-sm", "sm-store", 90e-6, status="incorrect"),  # never counted
        _fused_record("inter-sm", "sm-store", 90e-6, tokens=8192),  # 2 MiB on the link: above max_bytes
        _fused_record("ce-overlap", "copy-engine", 7e-6),
        _fused_record("ce-overlap", "copy-engine", 8e-6, tokens=128),  # (7 + 8) / 2 = 7.5 µs
        _fused_record("intra-sm", "sm-store", 4e-6),  # one record is not enough for a measurement
        _record("sm-store", 50e-6),  # a serial collective: a hand-off, not a fused kernel's cost
    ]
    found = {(h.mechanism, h.schedule): h for h in overlaps(records, resolve("h200x2"), max_bytes=KIB256)}
    assert set(found) == {("sm-store", "inter-sm"), ("copy-engine", "ce-overlap")}
    assert found["sm-store", "inter-sm"].seconds == pytest.approx(6e-6, abs=1e-12)
    assert found["copy-engine", "ce-overlap"].seconds == pytest.approx(7.5e-6, abs=1e-12)
    assert {h.mechanism for h in handoffs(records, resolve("h200x2"), max_bytes=KIB256)} == set()  # one serial


def test_calibrate_writes_fused_fixed_costs_the_model_then_charges(tmp_path):
    topo_file = tmp_path / "node.json"
    dump(resolve("h200x2"), topo_file)
    results = tmp_path / "results.jsonl"
    rows = [_fused_record("inter-sm", "sm-store", 4e-6), _fused_record("inter-sm", "sm-store", 6e-6, tokens=128)]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = CliRunner().invoke(app, ["topology", "calibrate", str(topo_file), str(results)])
    assert out.exit_code == 0, out.output
    assert "sm-store: fused inter-sm fixed cost 5 µs (median of 2 records)" in out.output
    written = load_topology(topo_file)
    before = resolve("h200x2").mechanisms["sm-store"].overlap_s
    assert written.mechanisms["sm-store"].overlap_s == before | {"inter-sm": pytest.approx(5e-6, abs=1e-12)}
    source = written.sources[written.mechanisms["sm-store"].sources["overlap_s"]]
    assert source.basis == "measured" and str(results) in source.cite
    # the first record measured 4 µs above the model without the cost; the model now charges the median, 5 µs
    w = workload_of(load("gemm-all-reduce"), 2, rows[0]["params"])
    p = predict(w, written.system(2), Mechanism.SM_STORE, Schedule.INTER_SM, 16)
    assert p.t_s == pytest.approx(rows[0]["median_s"] + 1e-6, abs=1e-12)
    shown = CliRunner().invoke(app, ["topology", "show", str(topo_file)])
    assert "fixed cost of a fused kernel per call" in shown.output and "sm-store inter-sm 5 µs" in shown.output


def test_a_second_calibration_keeps_the_first_ones_source_for_what_it_leaves_alone(tmp_path):
    # run 1 sets SM loads' hand-off from serial records; run 2, from other files, only fused costs: the hand-off
    # must still cite run 1's command, the fused cost run 2's
    topo_file = tmp_path / "node.json"
    dump(resolve("h200x2"), topo_file)
    first, second = tmp_path / "serial.jsonl", tmp_path / "fused.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in [_record("sm-load", 2e-6), _record("sm-load", 4e-6)]))
    rows = [_fused_record("inter-sm", "sm-store", 4e-6), _fused_record("inter-sm", "sm-store", 6e-6, tokens=128)]
    second.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for results in (first, second):
        out = CliRunner().invoke(app, ["topology", "calibrate", str(topo_file), str(results)])
        assert out.exit_code == 0, out.output
    written = load_topology(topo_file)
    handoff_source = written.sources[written.mechanisms["sm-load"].sources["handoff_s"]]
    fused_source = written.sources[written.mechanisms["sm-store"].sources["overlap_s"]]
    assert str(first) in handoff_source.cite and str(second) not in handoff_source.cite
    assert str(second) in fused_source.cite and str(first) not in fused_source.cite
    assert written.mechanisms["sm-load"].handoff_s == pytest.approx(3e-6, abs=1e-12)  # (2 + 4) / 2, untouched


def _files(tmp_path, preset: str, measured_on: str):
    """A topology file of `preset`, and two sm-load records (excesses 2 and 4 µs) measured on `measured_on`."""
    topo_file, results = tmp_path / f"{preset}.json", tmp_path / "results.jsonl"
    dump(resolve(preset), topo_file)
    rows = [_record("sm-load", 2e-6), _record("sm-load", 4e-6)]
    results.write_text("".join(json.dumps(r | {"environment": {"topology": measured_on}}) + "\n" for r in rows))
    return topo_file, results


def test_records_measured_on_another_topology_are_refused_unless_forced(tmp_path):
    # records profiled on h200x2 (their environment says so) against an H100 file: another node's excesses
    topo_file, results = _files(tmp_path, "hgx-h100-8", measured_on="h200x2")
    before = topo_file.read_text()
    out = CliRunner().invoke(app, ["topology", "calibrate", str(topo_file), str(results)])
    assert out.exit_code == 2, out.output
    assert len(out.stderr.strip().splitlines()) == 1
    assert "is topology 'hgx-h100-8' but records were measured on 'h200x2'" in out.stderr and "--force" in out.stderr
    assert topo_file.read_text() == before  # nothing written
    forced = CliRunner().invoke(app, ["topology", "calibrate", str(topo_file), str(results), "--force"])
    assert forced.exit_code == 0, forced.output
    # the records' excesses are over the h200x2 model; on the H100 file they are whatever they are, but set
    assert load_topology(topo_file).mechanisms["sm-load"].sources["handoff_s"].startswith("calibrate")


def test_records_of_the_files_own_topology_are_used(tmp_path):
    topo_file, results = _files(tmp_path, "h200x2", measured_on="h200x2")
    out = CliRunner().invoke(app, ["topology", "calibrate", str(topo_file), str(results)])
    assert out.exit_code == 0, out.output
    assert load_topology(topo_file).mechanisms["sm-load"].handoff_s == pytest.approx(3e-6, abs=1e-12)  # (2 + 4) / 2
