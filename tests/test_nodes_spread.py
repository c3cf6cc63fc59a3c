"""`--nodes N -n W`: W ranks spread evenly over the N nodes joined, so the bound is the two-node one it says it is.

Before, `bound all-reduce -t hgx-h100-8 -n 8 --nodes 2` printed "hgx-h100-8@2, 8 ranks" and bounded one node (all 8
ranks on node 0: no network term), while `-n 12 --nodes 2` was refused."""

import json

from typer.testing import CliRunner

from pkroof.cli import app


def _bound(*args: str) -> dict:
    done = CliRunner().invoke(app, ["bound", "all-reduce", "-t", "hgx-h100-8", "--size", "1G", *args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_eight_ranks_on_two_nodes_are_four_a_node_and_cross_the_network():
    b = _bound("-n", "8", "--nodes", "2")
    assert (b["world_size"], b["nodes"]) == (8, 2)
    assert set(b["link_terms"]) == {"scale-up", "scale-out"}  # 4 ranks a node: half the ring crosses the NICs


def test_all_the_gpus_of_two_nodes_are_eight_a_node_as_before():
    assert (_bound("--nodes", "2")["world_size"], _bound("-n", "16", "--nodes", "2")["world_size"]) == (16, 16)


def test_ranks_that_do_not_spread_evenly_are_one_line():
    done = CliRunner().invoke(app, ["bound", "all-reduce", "-t", "hgx-h100-8", "-n", "9", "--nodes", "2"])
    assert done.exit_code == 2
    assert done.stderr.strip() == "pkroof: 9 ranks do not spread evenly over 2 nodes"
