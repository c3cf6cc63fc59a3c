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
    from bound_cases import build

    from pkroof.rooflines import advise, bound
    from pkroof.show import builtin_kernels_text

    # 256 KiB on 2 ranks: the model prefers LL (no flag step; README), and on 2 ranks a one-shot all-reduce sends S
    # in one step where a two-shot sends S/2 twice, in two dependent steps: one-shot it is
    system = preset("h200x2").system(2)
    advice = advise(bound(build("all-reduce", 2, "bf16", size=256 * 1024), system))
    assert advice.best.label == "sm-store LL" and advice.best.algorithms == ("one-shot",)
    marked = [line for line in builtin_kernels_text("all-reduce", advice).splitlines() if "recommended" in line]
    assert [line.split()[0] for line in marked] == ["pkroof-one-shot-ll"]  # not pkroof-two-shot-ll (two-shot)


def test_advise_says_which_built_ins_are_for_smaller_messages_than_asked():
    import re
    from pathlib import Path

    from bound_cases import build

    from pkroof.kernels.registry import BUILTIN_IMPLS
    from pkroof.rooflines import advise, bound
    from pkroof.show import builtin_kernels_text

    # the LL kernels refuse a rank's input over kernels/low_latency.py's MAX_BYTES (read from its source: importing
    # it needs triton); the registry carries the same limit
    source = (Path(__file__).parents[1] / "kernels" / "low_latency.py").read_text()
    shift = re.search(r"^MAX_BYTES = (\d+) << (\d+)", source, re.M)
    limit = int(shift[1]) << int(shift[2])
    assert BUILTIN_IMPLS["pkroof-one-shot-ll"].max_input_bytes == limit == 64 * 2**20
    system = preset("h200x2").system(2)
    for size, one_shot_says in ((256 * 2**20, "refuses a rank's input over 64 MiB"), (4 * 2**20, "up to 1 MiB")):
        advice = advise(bound(build("all-reduce", 2, "bf16", size=size), system))
        lines = {line.split()[0]: line for line in builtin_kernels_text("all-reduce", advice, size).splitlines()[1:]}
        assert one_shot_says in lines["pkroof-one-shot-ll"]
        assert "(" not in lines["pkroof-one-shot-push"]  # no limit of its own: nothing said


def test_advice_quotes_an_uneven_all_to_alls_own_bytes_per_peer_not_the_even_split():
    from pkroof.rooflines import Collective, CommOp, Workload, advise, bound

    # 2 ranks, all-to-all of 8 MiB in nccl-tests' convention: evenly, each rank sends S/2 = 4 MiB to its one peer.
    # This rank sends 16/3 MiB (5.33 MiB) and receives 8/3: with one peer, its largest copy is 5.33 MiB
    size, sent = 8 * 2**20, 16 / 3 * 2**20
    op = CommOp("dispatch", Collective.ALL_TO_ALL, size, 2, send_bytes=sent, recv_bytes=sent / 2)
    advice = advise(bound(Workload("uneven", comm=(op,), dtype="bf16"), preset("h200x2").system(2)))
    assert advice.facts["message_bytes"] == sent
    even = advise(bound(Workload("even", comm=(dataclasses.replace(op, send_bytes=None, recv_bytes=None),),
                                  dtype="bf16"), preset("h200x2").system(2)))  # fmt: skip
    assert even.facts["message_bytes"] == size / 2
