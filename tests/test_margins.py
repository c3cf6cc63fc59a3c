"""Error bands (rooflines/margins.py): set from tune rows only, and the module's table is what --bands regenerates."""

from __future__ import annotations

import dataclasses

import pytest

from pkroof.rooflines import margins
from tools import head_to_head as h2h
from tools import published_runs


def _with_ratio(e: h2h.Evaluated, ratio: float, split: str) -> h2h.Evaluated:
    side = dataclasses.replace(e.side, split=split, time_s=ratio * e.predicted_s)
    return dataclasses.replace(e, side=side)


def test_band_is_10th_to_90th_percentile_of_tune_ratios() -> None:
    e = next(x for x in h2h.evaluate_all() if x.side.split == "tune")
    ratios = [0.5 + 0.1 * i for i in range(11)]  # 0.5 .. 1.5, eleven points
    found = h2h.bands([_with_ratio(e, r, "tune") for r in ratios])
    (lo, hi), rows = found[h2h._label(e.side)]
    # inclusive percentiles over 11 sorted points: the 10th is the 2nd point, the 90th the 10th point
    assert lo == pytest.approx(0.5 + 0.1 * 1)
    assert hi == pytest.approx(0.5 + 0.1 * 9)
    assert len(rows) == len(ratios)


def test_held_out_rows_set_no_band() -> None:
    e = next(x for x in h2h.evaluate_all() if x.side.split == "tune")
    tune = [_with_ratio(e, r, "tune") for r in (0.9, 1.0, 1.1)]
    wild = [_with_ratio(e, r, "holdout") for r in (0.01, 100.0)]
    assert h2h.bands(tune + wild) == h2h.bands(tune)
    assert h2h.bands(wild) == {}


def test_nccl_band_from_published_tune_rows_only() -> None:
    found = h2h.nccl_band()
    assert found is not None
    (lo, hi), ids = found
    rows = {r.id: r for r in published_runs.read(h2h.PUBLISHED)}
    assert ids and all(rows[i].split == "tune" and rows[i].kind == "nccl" and rows[i].counted for i in ids)
    assert lo <= 1.0 <= hi  # these rows fitted NCCL's lines: the band straddles an exact prediction


def test_module_table_is_what_bands_regenerates() -> None:
    found = h2h.bands(h2h.evaluate_all())
    nccl = h2h.nccl_band()
    assert nccl is not None
    found["nccl"] = nccl
    assert set(found) == set(margins.BANDS)
    for m, ((lo, hi), _) in found.items():
        assert margins.BANDS[m] == pytest.approx((lo, hi), abs=5e-4)  # printed to 3 decimals


def test_span_scales_prediction_and_none_without_band() -> None:
    lo, hi = margins.BANDS["sm-load"]
    assert margins.span("sm-load", 10e-6) == pytest.approx((lo * 10e-6, hi * 10e-6))
    assert margins.span("no-such-mechanism", 10e-6) is None
    with pytest.raises(ValueError, match="positive"):
        margins.span("sm-load", 0.0)
