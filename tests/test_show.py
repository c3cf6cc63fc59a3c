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
