"""Costs that grow with the peer count (issue 31, item 1): a staged collective's hand-off was measured on a node
where a rank has one peer; each further peer adds `per_peer_s` (its flags go to and come from every peer). The
presets carry the mean growth per peer of two published one-shot pull all-reduces from 2 to 8 H100s
(tests/data/head_to_head, split=tune)."""

import dataclasses

import pytest

from pkroof.rooflines import Algorithm, Collective, Mechanism, Protocol, Schedule, TransferModel, predict
from pkroof.rooflines.builders import collective
from pkroof.topology import files
from pkroof.topology.presets import PER_PEER_S, preset

# sglang#2904, 512 elements: sglang's kernel 3.7 µs at 2 ranks, 5.9 at 8; vLLM's 9.5 and 10.1: 6 more peers each
SLOPES_S = ((5.9e-6 - 3.7e-6) / 6, (10.1e-6 - 9.5e-6) / 6)


def _model(**kw) -> TransferModel:
    return TransferModel(Mechanism.SM_LOAD, True, 2e-6, 300e9, 10e9, **kw)


def test_the_presets_per_peer_cost_is_the_mean_of_the_two_published_slopes():
    assert pytest.approx(sum(SLOPES_S) / 2) == PER_PEER_S


def test_one_peer_pays_the_measured_handoff_alone():
    assert _model(handoff_s=2.5e-6, per_peer_s=0.3e-6).handoff_for(Protocol.SIMPLE, peers=1) == 2.5e-6


def test_each_further_peer_adds_its_cost():
    got = _model(handoff_s=2.5e-6, per_peer_s=0.3e-6).handoff_for(Protocol.SIMPLE, peers=7)
    assert got == pytest.approx(2.5e-6 + (7 - 1) * 0.3e-6)


def test_an_ll_handoff_grows_with_peers_too():
    got = _model(handoff_s=2.5e-6, ll_handoff_s=1e-6, per_peer_s=0.3e-6).handoff_for(Protocol.LL, peers=3)
    assert got == pytest.approx(1e-6 + (3 - 1) * 0.3e-6)


def _without_per_peer(system):
    mechanisms = {k: dataclasses.replace(m, per_peer_s=0.0) for k, m in system.mechanisms.items()}
    return dataclasses.replace(system, mechanisms=mechanisms)


@pytest.mark.parametrize("world", [4, 8])
def test_a_one_shot_pull_on_an_8_gpu_preset_pays_each_peer_beyond_the_first(world: int):
    system = preset("hgx-h100-8").system(world)
    w = collective(Collective.ALL_REDUCE, world, "bf16", size=2048 * world)
    args = (Mechanism.SM_LOAD, Schedule.SERIAL)
    with_peers = predict(w, system, *args, algorithm=Algorithm.ONE_SHOT)
    without = predict(w, _without_per_peer(system), *args, algorithm=Algorithm.ONE_SHOT)
    assert with_peers.t_s - without.t_s == pytest.approx((world - 1 - 1) * PER_PEER_S)


def test_the_measured_two_gpu_node_is_unchanged():
    system = preset("h200x2").system(2)
    w = collective(Collective.ALL_REDUCE, 2, "bf16", size=1 << 20)
    for mechanism in (Mechanism.SM_LOAD, Mechanism.SM_STORE):
        a = predict(w, system, mechanism, Schedule.SERIAL)
        b = predict(w, _without_per_peer(system), mechanism, Schedule.SERIAL)
        assert a.t_s == b.t_s


def test_every_device_initiated_mechanism_of_a_preset_cites_where_its_per_peer_cost_comes_from():
    t = preset("hgx-h100-8")
    for name in ("sm-load", "sm-store", "tma", "multimem"):
        assert t.mechanisms[name].per_peer_s == PER_PEER_S
    for name in ("sm-load", "sm-store", "tma"):
        assert t.mechanisms[name].sources["per_peer_s"] == "peers-sglang2904"
    # multimem carries SM loads' figure, marked nominal: none was published for multimem (tests/test_multimem.py)
    assert t.mechanisms["multimem"].sources["per_peer_s"] == "multimem-nominal"
    assert "peers-sglang2904" in t.sources


def test_the_copy_engine_has_no_per_peer_cost_without_a_published_figure():
    t = preset("hgx-h100-8")
    assert t.mechanisms["copy-engine"].per_peer_s == 0.0
    assert "per_peer_s" not in t.mechanisms["copy-engine"].sources


def test_a_topology_file_keeps_the_per_peer_cost():
    t = preset("hgx-b200-8")
    assert files.from_dict(files.to_dict(t)).mechanisms["sm-store"].per_peer_s == PER_PEER_S
