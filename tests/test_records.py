"""Result records: what they hold, how strictly they are read, and that version 1 records still load."""

import json
import math

from pkroof.records import format as records

V1 = {  # a record as pkroof wrote it before version 2: the model's output stored beside the measurement
    "schema": "pkroof.record/1",
    "problem": "all-reduce",
    "shape": "small",
    "params": {"size_bytes": 1048576},
    "impl": "reference",
    "world_size": 2,
    "status": "correct",
    "median_s": 1.6e-05,
    "t_roof_s": 2.7e-06,
    "fraction_of_roofline": 0.16,
    "predicted_s": 1.6e-05,
    "prediction_error": 0.01,
    "comm_bytes": 1048576,
    "analysis": {"bound": {}, "advice": {}},
    "model_refreshed": "2026-12-01 a459d92",
    "environment": {"backend": "nccl", "topology": "h200x2", "gpu": "NVIDIA H200"},
}


def _read(tmp_path, *lines: str):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return records.read(path)


def test_a_version_1_record_is_read_as_version_2_without_the_models_fields(tmp_path):
    (got,), problems = _read(tmp_path, json.dumps(V1))
    assert problems == []
    assert got["schema"] == records.SCHEMA and got["topology"] == {"name": "h200x2"}
    assert "topology" not in got["environment"] and got["environment"]["gpu"] == "NVIDIA H200"
    assert not set(records.MODEL_FIELDS) & set(got)
    assert got["median_s"] == V1["median_s"]  # what was measured stays


def test_lines_that_are_not_records_are_named_and_skipped_and_the_rest_kept(tmp_path):
    good = json.dumps(V1 | {"schema": records.SCHEMA})
    bad = {
        "unknown schema": json.dumps(V1 | {"schema": "pkroof.record/9"}),
        "no schema": json.dumps({k: v for k, v in V1.items() if k != "schema"}),
        "NaN": good.replace('"median_s": 1.6e-05', '"median_s": NaN'),
        "Infinity": good.replace('"median_s": 1.6e-05', '"median_s": Infinity'),
        "1e400": good.replace('"median_s": 1.6e-05', '"median_s": 1e400'),
        "a repeated key": good.replace('"impl": "reference"', '"impl": "reference", "impl": "x"'),
        "a world size of no ranks": good.replace('"world_size": 2', '"world_size": 0'),
        "deep nesting": "[" * 100_000 + "]" * 100_000,
        "not an object": "[1, 2]",
    }
    got, problems = _read(tmp_path, good, *bad.values(), good.replace('"impl": "reference"', '"impl": "b"'))
    assert [r["impl"] for r in got] == ["reference", "b"]
    assert len(problems) == len(bad)
    for number, problem in enumerate(problems, 2):
        assert problem.startswith(f"{tmp_path / 'results.jsonl'}:{number}: skipped, not a record")
        assert "\n" not in problem and len(problem) < 400


def test_every_record_written_is_strict_json(tmp_path):
    path = tmp_path / "out" / "results.jsonl"
    records.append(path, {"problem": "p", "shape": "s", "params": {}, "impl": "i", "world_size": 2, "x": 1.5})
    records.append(path, {"problem": "p", "shape": "s", "params": {}, "impl": "j", "world_size": 2, "x": [math.inf]})
    lines = path.read_text().splitlines()
    strict = [json.loads(line, parse_constant=lambda c: 1 / 0) for line in lines]  # NaN/Infinity would raise
    assert [r["x"] for r in strict] == [1.5, [None]] and {r["schema"] for r in strict} == {records.SCHEMA}


def test_a_suite_record_is_bounded_by_the_workload_as_counted_now_unless_its_file_changed():
    import dataclasses

    from pkroof.analysis import trace_cache
    from pkroof.analysis.catalogue import load
    from pkroof.records.evaluate import record_workload
    from pkroof.rooflines.workload import workload_to_dict

    # ring-attention's small shape on 2 ranks ships its trace (kernels/problems/_traced.jsonl); a record made by an
    # older tracer stored another count: half the FLOPs, say. Same file bytes: the shipped count is used
    problem = load("ring-attention")
    params = problem.params(None, {})
    now = trace_cache.shipped(trace_cache.key(problem, 2, params, None, "meta", any_torch=True))
    assert now is not None
    old = dataclasses.replace(now, compute=tuple(dataclasses.replace(c, flops=c.flops / 2) for c in now.compute))
    record = {"problem": "ring-attention", "params": params, "world_size": 2, "workload": workload_to_dict(old)}
    assert record_workload(record | {"problem_sha256": problem.sha256})[1] == now
    # another version of the file measured: its own stored workload is the one that describes it
    assert record_workload(record | {"problem_sha256": "0" * 64})[1] == old
    # a hand-written workload is always rebuilt by the catalogue (None), a stored copy notwithstanding
    ar = load("all-reduce")
    stored = {
        "problem": "all-reduce",
        "params": ar.params(None, {}),
        "world_size": 2,
        "workload": workload_to_dict(old),
    }
    assert record_workload(stored | {"problem_sha256": ar.sha256}) == (ar, None)
