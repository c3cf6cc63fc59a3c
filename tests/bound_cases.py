"""The model's workload builders by problem name, for tests of the math (rooflines/builders.py takes them by kind).

build("all-reduce", 8, size=1 << 30)              a collective of size bytes, nccl-tests' convention
build("gemm-reduce-scatter", 8, m=.., n=.., k=..)  a tensor-parallel GEMM fusion, k per rank
"""

import math

from pkroof.rooflines import Collective, bound
from pkroof.rooflines.builders import all_gather_gemm, collective, gemm_all_reduce, gemm_reduce_scatter

GEMMS = {
    "gemm-reduce-scatter": gemm_reduce_scatter,
    "all-gather-gemm": all_gather_gemm,
    "gemm-all-reduce": gemm_all_reduce,
}
COLLECTIVES = tuple(k.value for k in Collective)
NAMES = (*COLLECTIVES, *GEMMS)


def build(name, world_size, dtype="bf16", **params):
    if name in COLLECTIVES:
        return collective(Collective(name), world_size, dtype, **params)
    return GEMMS[name](world_size, dtype, **params)


def _gemm_rs(k, system, m=32768, n=32768):
    return bound(build("gemm-reduce-scatter", system.world_size, m=m, n=n, k=k), system)


def _waves_s(m, n, k, rate, sms=100):
    """A GEMM alone on every SM: whole waves of 128×256 tiles, each SM at 1/sms of the rate (split-K only where the
    tiles leave SMs idle, not here): ⌈tiles / SMs⌉ · 2·128·256·K / (rate / SMs)."""
    tiles = math.ceil(m / 128) * math.ceil(n / 256)
    return math.ceil(tiles / sms) * 2 * 128 * 256 * k * sms / rate
