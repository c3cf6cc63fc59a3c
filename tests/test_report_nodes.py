"""The report across nodes: a bound measured on more than one node shows its scale-up (NVLink) and scale-out (network)
link terms apart and which binds, and every problem page on a machine with a network draws the bound's terms against
the number of nodes with the node count where the network takes over, in a sentence. Records written by hand, the
numbers derived here."""

import json
import re

import pytest

pytest.importorskip("pandas")
pytest.importorskip("plotly")

from typer.testing import CliRunner

from pkroof.cli import app
from pkroof.records.report_data import Crossover
from pkroof.reports import html
from pkroof.rooflines.analyze import NodesPoint
from pkroof.topology import dumps, resolve

GiB = 2**30


def record(problem, size, *, world, nodes=None, ranks_per_node=None, topology="hgx-h100-8@2", median=4e-3):
    """A measured record (schema pkroof.record/2) of a suite collective; `nodes` and `ranks_per_node` where given."""
    out = {
        "schema": "pkroof.record/2",
        "problem": problem,
        "shape": f"small size={size // GiB} GiB" if size >= GiB else f"small size={size // 2**20} MiB",
        "params": {"size_bytes": size},
        "impl": "reference",
        "world_size": world,
        "status": "correct",
        "median_s": median,
        "p10_s": median * 0.95,
        "p90_s": median * 1.05,
        "topology": {"name": topology},
        "date": "2026-12-02T10:00:00+00:00",
        "environment": {"host": "node-1", "backend": "nccl", "gpu": "NVIDIA H100 80GB HBM3"},
    }
    return out | ({"nodes": nodes, "ranks_per_node": ranks_per_node} if nodes else {})


def _report(tmp_path, records, *, topology=None, name="r"):
    results = tmp_path / f"{name}.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    args = ["report", str(results), "--out", str(tmp_path / name)]
    if topology is not None:
        args += ["--topology", str(topology)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return tmp_path / name


@pytest.fixture
def two_nodes(tmp_path):
    """The topology file of 2 hgx-h100-8 nodes joined by their 8 ConnectX-7 NICs (what `pkroof topology show
    hgx-h100-8 --nodes 2 --json` writes): records measured there name it hgx-h100-8@2."""
    path = tmp_path / "hgx-h100-8-x2.json"
    path.write_text(dumps(resolve("hgx-h100-8", nodes=2)))
    return path


def _bound_table(page: str) -> str:
    end = "<h2>Implementations</h2>" if "<h2>Implementations</h2>" in page else "<h2>Advice</h2>"
    return page[page.index("<h2>Bound</h2>") : page.index(end)]


def test_a_two_node_all_reduce_page_shows_both_tiers_and_where_the_network_takes_over(tmp_path, two_nodes):
    # A 1 GiB all-reduce on 2 nodes of 8 H100s, 16 ranks. Inside a node NVLS reduce-scatters and all-gathers: S each
    # way at the switch ports' 450 GB/s, 2.39 ms. Across, each GPU's rail all-reduces its S/8 over N = 2 nodes:
    # 2·(N−1)/N·S/8 = S/8 = 128 MiB at its 50 GB/s of NIC (8 × 400 Gb/s over 8 GPUs), 2.68 ms: the network binds.
    # Against the number of nodes the scale-up term stays S/450e9 while the scale-out term 2·(N−1)/N·S/8/50e9
    # grows from S/400e9 at N = 2, already above it: network-bound from 2 nodes.
    out = _report(tmp_path, [record("all-reduce", GiB, world=16, nodes=2, ranks_per_node=8)], topology=two_nodes)
    page = (out / "problem-all-reduce.html").read_text()
    table = _bound_table(page)
    assert ">scale-up</th>" in table and ">scale-out</th>" in table and "2 nodes" in table
    binds = '(?: <span class="pill fair">binds</span>)?'
    tiers = rf'<td class="num">([^<]+?){binds}<br>\s*<span class="na">([^<]+ at [^<]+)</span>'
    up, net = re.findall(tiers, table)
    assert up == ("2.39 ms", "1 GiB at 450 GB/s") and net == ("2.68 ms", "128 MiB at 50 GB/s")
    assert table.count("binds") == 1 and '2.68 ms <span class="pill fair">binds</span>' in table
    assert "<h2>NVLink against the network as nodes grow</h2>" in page and 'id="crossover"' in page
    assert "Network-bound from 2 nodes." in page


def test_the_crossover_takes_the_records_ranks_per_node(tmp_path, two_nodes):
    # A 1 GiB all-gather on 2 nodes of 4 ranks (8 of hgx-h100-8@2's 16 GPUs). Inside a node of g = 4 NVLS all-gathers:
    # each rank receives (g−1)/g·S = 3/4·S at 450 GB/s, 1.667 ps per byte of S. Across N nodes each rail gathers S/4:
    # (N−1)/N·S/4, at the node's 8 × 50 GB/s of NICs shared by its 4 ranks = 100 GB/s: at N = 2, S/8 at 100 GB/s =
    # 1.25 ps; at N = 4, 3/16·S at 100 GB/s = 1.875 ps, above NVLink's 1.667: NVLink-bound up to 2 nodes,
    # network-bound from 4. (8 ranks a node would give 7/8·S at 450 GB/s = 1.944 ps against (N−1)/N·S/8 at 50 GB/s,
    # 1.875 ps at N = 4 and 2.1875 ps at N = 8: from 8.)
    rec = record("all-gather", GiB, world=8, nodes=2, ranks_per_node=4)
    page = (_report(tmp_path, [rec], topology=two_nodes) / "problem-all-gather.html").read_text()
    assert "4 ranks a node" in page
    assert "NVLink-bound up to 2 nodes, network-bound from 4." in page


def test_a_single_node_page_has_no_scale_out_term(tmp_path):
    # 2 ranks of the h200x2 node: one node, no NICs. Its bound has one link term, on NVLink, and its page neither
    # splits it nor draws a crossover (nothing to cross to)
    rec = record("all-reduce", 256 * 2**20, world=2, topology="h200x2", median=1e-3)
    page = (_report(tmp_path, [rec]) / "problem-all-reduce.html").read_text()
    assert "scale-out" not in page and ">scale-up</th>" not in _bound_table(page)
    assert "scale-up at" in _bound_table(page)  # the one tier, named as before
    assert 'id="crossover"' not in page and "against the network" not in page


def test_a_traced_problem_says_in_one_line_why_its_crossover_is_not_drawn(tmp_path):
    # on hgx-h100-8 (a network, so the chart is asked for) a problem with no hand-written workload is traced from its
    # reference; pkroof ships its traces for 2, 8 and 72 ranks only, and a report traces nothing
    out = tmp_path / "analytic"
    assert CliRunner().invoke(app, ["report", "--topology", "hgx-h100-8", "--out", str(out)]).exit_code == 0
    page = (out / "problem-tp-mlp-sequence-parallel.html").read_text()
    assert 'id="crossover"' not in page
    line = re.search(r'<p class="na">Not drawn: ([^<]*)</p>', page).group(1)
    assert line == (
        "2 to 1024 nodes left out: tp-mlp-sequence-parallel is traced from its reference, and its traces ship for "
        "2, 8 and 72 ranks only."
    )
    # gemm-all-reduce has a hand-written workload: drawn at llama3-70b-tp8, whose K (in_features = 28672 = 7·2^12)
    # splits over 8·N ranks up to 512 nodes (4096 ranks) but not over 8192
    drawn = (out / "problem-gemm-all-reduce.html").read_text()
    assert 'id="crossover"' in drawn
    assert "1024 nodes left out: in_features=28672 is not divisible by the world size 8192." in drawn


@pytest.mark.parametrize(
    ("nodes", "first", "said"),
    [
        ([1, 2, 4, 8, 16], 8, "NVLink-bound up to 4 nodes, network-bound from 8."),
        ([1, 2, 4], 2, "Network-bound from 2 nodes."),
        ([1, 2, 4], None, "NVLink-bound at every size shown (1 to 4 nodes)."),
        ([1, 4, 16], 16, "NVLink-bound up to 4 nodes, network-bound from 16."),  # 2 and 8 left out
    ],
)
def test_the_crossover_sentence(nodes, first, said):
    points = tuple(NodesPoint(n, 8 * n, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0) for n in nodes)
    crossover = Crossover("s", 8, "NVLink", points, first, "")
    assert html.crossover_sentence(crossover) == said
