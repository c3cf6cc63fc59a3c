"""Causal attention counted as the work a causal kernel does (issue 32 item 8): scaled_dot_product_attention with
is_causal=True is charged the (query, key) pairs its mask keeps, Σ_{i<L} min(i + 1, S) (L(L + 1)/2 where L = S),
2·E FLOPs each in Q·Kᵀ and 2·Ev in P·V, per (batch, head); traced on meta tensors on 2 ranks.
"""

import pytest

torch = pytest.importorskip("torch")

from pkroof.analysis.catalogue import load  # noqa: E402
from pkroof.analysis.causal import causal_pairs  # noqa: E402
from pkroof.analysis.trace import trace_on_meta  # noqa: E402

B, H, E, EV = 2, 4, 32, 16
FILE = """
import torch
import torch.nn.functional as F


def inputs(rank, world_size, *, seed, device, queries=64, keys=64):
    q = torch.empty(2, 4, queries, 32, device=device, dtype=torch.bfloat16)
    k = torch.empty(2, 4, keys, 32, device=device, dtype=torch.bfloat16)
    v = torch.empty(2, 4, keys, 16, device=device, dtype=torch.bfloat16)
    return q, k, v


def reference(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, {how})
"""


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("PKROOF_TRACE_CACHE", "off")


def _flops(tmp_path, how: str, queries: int = 64, keys: int = 64) -> float:
    path = tmp_path / "attention.py"
    path.write_text(FILE.replace("{how}", how))
    p = load(str(path))
    return trace_on_meta(p, 2, p.params(overrides={"queries": queries, "keys": keys})).flops_by_dtype["bf16"]


def test_causal_pairs_below_and_above_the_diagonal():
    assert causal_pairs(3, 5) == 1 + 2 + 3  # every query sees its own prefix, S longer than L
    assert causal_pairs(5, 3) == 1 + 2 + 3 + 3 + 3  # queries past S see all S keys
    assert causal_pairs(64, 64) == 64 * 65 // 2


def test_causal_attention_is_charged_the_pairs_its_mask_keeps(tmp_path):
    assert _flops(tmp_path, "is_causal=True") == 2 * B * H * (64 * 65 // 2) * (E + EV)


def test_causal_attention_with_fewer_queries_than_keys(tmp_path):
    assert _flops(tmp_path, "is_causal=True", queries=16, keys=64) == 2 * B * H * (16 * 17 // 2) * (E + EV)


def test_full_attention_is_charged_every_pair(tmp_path):
    assert _flops(tmp_path, "is_causal=False") == 2 * B * H * 64 * 64 * (E + EV)


def test_an_explicit_mask_is_charged_every_pair(tmp_path):
    # a mask's pattern is data: a kernel given one computes every tile
    mask = "attn_mask=torch.ones(64, 64, dtype=torch.bool, device=q.device).tril()"
    assert _flops(tmp_path, mask) == 2 * B * H * 64 * 64 * (E + EV)
