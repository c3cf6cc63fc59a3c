"""The MoE fusion builders (rooflines/builders.py): dispatch all-to-all → expert GEMM and expert GEMM → combine
all-to-all, against their derivations."""

import pytest
from conftest import make_system

from pkroof.rooflines import Collective, advise, bound
from pkroof.rooflines.builders import all_to_all_gemm, gemm_all_to_all

M, N, K = 8192, 14336, 4096  # Mixtral-like: 8192 routed rows on this rank, hidden 4096, expert FFN 14336


def test_dispatch_gemm_sends_a_and_multiplies_it():
    w = all_to_all_gemm(8, "bf16", m=M, n=N, k=K)
    (op,) = w.comm
    assert op.kind is Collective.ALL_TO_ALL and op.group_size == 8
    assert op.size_bytes == 2 * M * K  # A's bytes: every row this rank receives, balanced: as many as it sends
    assert op.consumer == "gemm" and op.producer is None
    assert op.consumer_reads == -(-N // 256)  # A read from peers once per 256-wide column tile of C
    assert w.compute[0].flops == 2 * M * N * K
    assert w.hbm_bytes == 2 * (M * K + K * N + M * N)  # own send buffer and B read, C written
    assert w.compute_scales_with == "n"


def test_gemm_combine_sends_c():
    w = gemm_all_to_all(8, "bf16", m=M, n=N, k=K)
    (op,) = w.comm
    assert op.kind is Collective.ALL_TO_ALL and op.size_bytes == 2 * M * N  # C's bytes
    assert op.producer == "gemm" and op.consumer is None
    assert w.compute[0].flops == 2 * M * N * K
    assert w.hbm_bytes == 2 * (M * K + K * N + M * N)  # A and B read, the rows received written
    assert w.compute_scales_with == "k"


@pytest.mark.parametrize("builder", [all_to_all_gemm, gemm_all_to_all])
def test_rows_must_split_over_the_ranks(builder):
    with pytest.raises(ValueError, match="m=100 is not divisible by the world size 8"):
        builder(8, "bf16", m=100, n=N, k=K)


def test_combine_hiding_threshold():
    # compute 2·m·n·k / R hides the all-to-all's (P−1)/P·2·m·n / B on the link iff k ≥ (P−1)/P · 2 · R / (2·B)
    system = make_system(flops=1000e12, peak=400e9)
    k_star = 7 / 8 * 2 * 1000e12 / (2 * 400e9)  # = 2187.5
    advice = advise(bound(gemm_all_to_all(8, "bf16", m=M, n=N, k=1024), system))
    assert advice.facts["k_threshold"] == pytest.approx(k_star, rel=1e-9)


def test_dispatch_hiding_threshold():
    # the same with n: 2·m·n·k / R against (P−1)/P·2·m·k / B
    system = make_system(flops=1000e12, peak=400e9)
    n_star = 7 / 8 * 2 * 1000e12 / (2 * 400e9)
    advice = advise(bound(all_to_all_gemm(8, "bf16", m=M, n=1024, k=K), system))
    assert advice.facts["n_threshold"] == pytest.approx(n_star, rel=1e-9)
