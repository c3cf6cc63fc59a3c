"""`pkroof topology show`'s text (pkroof/show.py): what a reader of the terminal needs without the HTML report."""

import dataclasses

from pkroof.show import topology_text
from pkroof.topology.presets import preset


def test_topology_show_lists_the_probes_health_flags_like_the_report():
    t = preset("h200x2")  # a probed node whose probe saw NVLink CRC errors (the shipped file's health lines)
    assert t.probe is not None and t.probe.health
    text = topology_text(t)
    assert f"health flags the probe saw ({len(t.probe.health)};" in text
    assert all(f"  {line}" in text for line in t.probe.health)
    healthy = dataclasses.replace(t, probe=dataclasses.replace(t.probe, health=()))
    assert "health flags" not in topology_text(healthy)
    assert "health flags" not in topology_text(preset("hgx-h100-8"))  # nominal: no probe


def test_memory_is_not_called_hbm_for_a_gddr_gpu():
    text = topology_text(preset("pcie-l40s-8"))  # the L40S has 48 GB of GDDR6 (its datasheet, the preset's source)
    assert "HBM at" not in text and "memory at" in text


def test_advise_marks_only_the_built_ins_that_run_the_recommended_algorithm():
    from builders import build

    from pkroof.rooflines import advise, bound
    from pkroof.show import builtin_kernels_text

    # 256 KiB on 2 ranks: the model prefers LL (no flag step; README), and on 2 ranks a one-shot all-reduce sends S
    # in one step where a two-shot sends S/2 twice, in two dependent steps: one-shot it is
    system = preset("h200x2").system(2)
    advice = advise(bound(build("all-reduce", 2, "bf16", size=256 * 1024), system))
    assert advice.best.label == "sm-store LL" and advice.best.algorithms == ("one-shot",)
    marked = [line for line in builtin_kernels_text("all-reduce", advice).splitlines() if "recommended" in line]
    assert [line.split()[0] for line in marked] == ["pkroof-one-shot-ll"]  # not pkroof-two-shot-ll (two-shot)
