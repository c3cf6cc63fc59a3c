"""Issue 32 item 9, the smaller ones: a vector norm is not named as work the trace could not count, and
`pkroof report DIR` reads the results.jsonl that `pkroof profile --out DIR` wrote there."""

import shutil
from pathlib import Path

import pytest

from pkroof.records.format import read, read_files

RECORDED = Path(__file__).parents[1] / "pkroof" / "recorded" / "2026-11-30-collectives-h200x2.jsonl"


def test_a_results_folder_is_read_as_the_results_file_profile_wrote_in_it(tmp_path):
    shutil.copy(RECORDED, tmp_path / "results.jsonl")
    assert read_files([tmp_path], print) == read(RECORDED)[0]


def test_a_folder_without_results_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="no such results file"):
        read_files([tmp_path], print)


def test_a_vector_norm_is_not_named_as_uncounted(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from pkroof.analysis.catalogue import load
    from pkroof.analysis.trace import trace_on_meta

    monkeypatch.setenv("PKROOF_TRACE_CACHE", "off")
    path = tmp_path / "norm.py"
    path.write_text(
        "import torch\n\n"
        "def inputs(rank, world_size, *, seed, device, n=1024):\n"
        "    return (torch.empty(n, device=device),)\n\n"
        "def reference(x):\n"
        "    return torch.linalg.vector_norm(x)\n"
    )
    p = load(str(path))
    w = trace_on_meta(p, 2, p.params())
    assert w.uncounted == ()
    assert w.hbm_bytes == 1024 * 4 + 4  # x read once, the norm (one fp32) written once
