"""The model's workload builders by problem name, for tests of the math (rooflines/builders.py takes them by kind).

build("all-reduce", 8, size=1 << 30)              a collective of size bytes, nccl-tests' convention
build("gemm-reduce-scatter", 8, m=.., n=.., k=..)  a tensor-parallel GEMM fusion, k per rank
"""

from pkroof.rooflines import Collective
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
