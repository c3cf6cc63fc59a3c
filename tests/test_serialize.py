"""rooflines/serialize.py: the one writer and reader of the model's results, on results the model makes."""

import dataclasses
import json
import math

import pytest
from bound_cases import build

from pkroof.rooflines import Bound, LinkTerm, Mechanism, Prediction, Schedule, Terms, bound
from pkroof.rooflines.advice import Advice
from pkroof.rooflines.analyze import analyze
from pkroof.rooflines.serialize import SCHEMA, from_dict, to_dict
from pkroof.topology import preset

MiB = 1 << 20


@pytest.fixture(scope="module")
def all_reduce() -> Bound:
    return bound(build("all-reduce", 2, "bf16", size=64 * MiB), preset("h200x2").system(2))


def test_a_bound_is_written_in_its_documents_order_each_value_as_json_has_it(all_reduce):
    doc = to_dict(all_reduce)
    assert list(doc) == list(Bound.json_fields) and doc["schema"] == SCHEMA == "pkroof.bound/1"
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc  # plain JSON data, nothing else
    assert doc["comm"][0]["kind"] == "all-reduce"
    assert doc["predictions"][0]["mechanism"] == all_reduce.predictions[0].mechanism.value
    assert doc["terms"] == dataclasses.asdict(all_reduce.terms) and doc["recommendation"] == to_dict(all_reduce.advice)
    assert list(doc["recommendation"]) == list(Advice.json_fields)


def test_a_collectives_rates_are_computed_once_in_the_model(all_reduce):
    # nccl-tests: algbw = S / t, busbw = algbw · 2(n − 1)/n for an all-reduce (n = 2: algbw)
    size = 64 * MiB
    assert all_reduce.algbw_Bps == size / all_reduce.t_roof_s == all_reduce.busbw_Bps
    for p in all_reduce.predictions:
        assert p.algbw_Bps == size / p.t_s and p.busbw_Bps == size / p.t_s * 2 * (2 - 1) / 2


@pytest.mark.parametrize("kind", ["prediction", "link term", "terms", "sweep point"])
def test_a_result_whose_document_is_its_fields_reads_back_equal(all_reduce, kind):
    a = analyze(all_reduce.workload, all_reduce.system, sweep=[all_reduce.workload])
    value = {
        "prediction": all_reduce.predictions[0],
        "link term": all_reduce.link_terms["scale-up"],
        "terms": all_reduce.terms,
        "sweep point": a.sweep[0],
    }[kind]
    assert from_dict(type(value), json.loads(json.dumps(to_dict(value)))) == value


def test_a_number_that_is_not_finite_is_null_and_reads_back_as_nan():
    term = LinkTerm(math.inf, 0.0, 1e9)
    assert to_dict(term) == {"t_s": None, "bytes_per_rank": 0.0, "bandwidth_Bps": 1e9}
    assert math.isnan(from_dict(LinkTerm, to_dict(term)).t_s)


def test_reading_names_the_missing_or_unknown_key():
    with pytest.raises(ValueError, match=r"^Terms\.latency_s: missing$"):
        from_dict(Terms, {"compute_s": 1.0, "hbm_s": 1.0, "link_s": 1.0})
    with pytest.raises(ValueError, match=r"^Terms: unknown key 'flops'$"):
        from_dict(Terms, {"compute_s": 1.0, "hbm_s": 1.0, "link_s": 1.0, "latency_s": 0.0, "flops": 2.0})


def test_an_unknown_name_is_a_value_error_that_says_where(all_reduce):
    doc = to_dict(all_reduce.prediction(Mechanism.NCCL, Schedule.SERIAL)) | {"mechanism": "pigeon"}
    with pytest.raises(ValueError, match=r"^Prediction\.mechanism: 'pigeon' is not one of copy-engine, sm-load"):
        from_dict(Prediction, doc)


def test_a_bound_is_not_read_back_whole(all_reduce):
    # its document names the workload and the system it was made of but does not hold them
    with pytest.raises(ValueError, match=r"^Bound\.workload: missing$"):
        from_dict(Bound, to_dict(all_reduce))
