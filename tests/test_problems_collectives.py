"""Collective, data-parallel, expert-parallel and long-tail problems: each reference on 2 and 4 gloo ranks
against an oracle computed here in one process, with plain torch, from every rank's inputs."""

import pytest

torch = pytest.importorskip("torch")

from gloo import problem_module, run_in_place_peers, run_on_ranks, run_references, small_inputs  # noqa: E402

from pkroof.rooflines import Collective, Workload  # noqa: E402

SEED = 7
# ZeRO's outputs pass through a bf16 mean gradient summed in gloo's order (the oracle sums in fp32): a few bf16 ulps
ZERO_STEP = dict(rtol=2e-2, atol=2e-2)

COLLECTIVES = {  # problem module → the collective its workload must model
    "all_reduce": Collective.ALL_REDUCE,
    "all_gather": Collective.ALL_GATHER,
    "reduce_scatter": Collective.REDUCE_SCATTER,
    "all_to_all": Collective.ALL_TO_ALL,
    "broadcast": Collective.BROADCAST,
    "reduce": Collective.REDUCE,
    "gather": Collective.GATHER,
    "scatter": Collective.SCATTER,
    "send_recv": Collective.SEND_RECV,
}
OTHERS = [
    "all_to_allv",
    "ddp_bucket_all_reduce",
    "fsdp_all_gather_params",
    "fsdp_reduce_scatter_grads",
    "zero_reduce_scatter_then_all_gather",
    "halo_exchange",
    "distributed_topk",
    "embedding_lookup",
]
ALL = [*COLLECTIVES, *OTHERS]


def _problem(name):
    return problem_module(name)


def _inputs(name, rank, world):
    return small_inputs(name, rank, world, SEED)


# ---- oracles: ins[r] is rank r's input tuple; each returns rank r's expected output tuple, for every r ----


def _sum(tensors):
    return torch.stack([t.float() for t in tensors]).sum(0)


def _empty(x):
    return x.new_empty(0)


def _all_reduce(ins, r):
    return (_sum(x for (x,) in ins).bfloat16(),)


def _all_gather(ins, r):
    return (torch.cat([x for (x,) in ins]),)


def _reduce_scatter(ins, r):
    return (_sum(x for (x,) in ins).bfloat16().chunk(len(ins))[r],)


def _all_to_all(ins, r):
    return (torch.cat([x.chunk(len(ins))[r] for (x,) in ins]),)  # chunk r of every rank, in source order


def _broadcast(ins, r):
    return (ins[0][0],)


def _reduce(ins, r):
    return (_sum(x for (x,) in ins).bfloat16() if r == 0 else _empty(ins[r][0]),)


def _gather(ins, r):
    return (torch.cat([x for (x,) in ins]) if r == 0 else _empty(ins[r][0]),)


def _scatter(ins, r):
    return (ins[0][0].chunk(len(ins))[r],)


def _send_recv(ins, r):
    return (ins[0][0] if r == 1 else _empty(ins[r][0]),)


def _all_to_allv(ins, r):
    world = len(ins)
    rows, counts = [], []
    for x, per_expert in ins:  # source rank s sends rank r the rows of experts r·E/P … (r+1)·E/P − 1
        per_rank = per_expert.view(world, -1)
        start = int(per_rank[:r].sum())
        rows.append(x[start : start + int(per_rank[r].sum())])
        counts.append(per_rank[r])
    return torch.cat(rows), torch.cat(counts)


def _ddp_bucket_all_reduce(ins, r):
    return ((_sum(x for (x,) in ins) / len(ins)).bfloat16(),)


def _fsdp_reduce_scatter_grads(ins, r):
    return ((_sum(x for (x,) in ins) / len(ins)).bfloat16().chunk(len(ins))[r],)


def _zero_reduce_scatter_then_all_gather(ins, r):
    lr = _problem("zero_reduce_scatter_then_all_gather").LR
    mean_grad = (_sum(g for _, g in ins) / len(ins)).bfloat16().float()
    masters = [m - lr * g for (m, _), g in zip(ins, mean_grad.chunk(len(ins)), strict=True)]
    return torch.cat(masters).bfloat16(), masters[r]


def _halo_exchange(ins, r):
    h = int(ins[0][1])
    rows = ins[0][0].shape[0]
    full = torch.cat([x for x, _ in ins])
    zeros = full.new_zeros(h, *full.shape[1:])  # open boundary: zero padding above rank 0 and below the last rank
    padded = torch.cat([zeros, full, zeros])
    return (padded[r * rows : r * rows + rows + 2 * h],)


def _embedding_lookup(ins, r):
    ids = ins[0][0]
    table = torch.cat([w for _, w in ins])
    return (table[ids],)


ORACLES = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
    "broadcast": _broadcast,
    "reduce": _reduce,
    "gather": _gather,
    "scatter": _scatter,
    "send_recv": _send_recv,
    "all_to_allv": _all_to_allv,
    "ddp_bucket_all_reduce": _ddp_bucket_all_reduce,
    "fsdp_all_gather_params": _all_gather,
    "fsdp_reduce_scatter_grads": _fsdp_reduce_scatter_grads,
    "zero_reduce_scatter_then_all_gather": _zero_reduce_scatter_then_all_gather,
    "halo_exchange": _halo_exchange,
    "embedding_lookup": _embedding_lookup,
}
SUMMED = {"all_reduce", "reduce_scatter", "reduce", "ddp_bucket_all_reduce", "fsdp_reduce_scatter_grads"}


def _check_topk(ins, outs):
    """torch.topk of the full logits; ties may pick other indices, so check values and that indices point at them."""
    full = torch.cat([logits for logits, _ in ins], dim=-1)
    k = int(ins[0][1])
    expected = torch.topk(full, k, dim=-1).values
    for values, indices in outs:
        torch.testing.assert_close(values, expected, rtol=0, atol=0)
        assert indices.dtype == torch.int64
        torch.testing.assert_close(full.gather(-1, indices), values, rtol=0, atol=0)
        assert all(len(set(row.tolist())) == k for row in indices)


def _assert_sum_close(got, want, magnitude, world, what):
    # n bf16 terms summed in any order: within (n − 1)·u·Σ|x| of the exact sum, plus u·|sum| for the oracle's
    # own rounding, where u = 2⁻⁸ is bf16's unit roundoff; `magnitude` is Σ|x| laid out like the output
    assert got.shape == want.shape and got.dtype == want.dtype, what
    excess = (got.float() - want.float()).abs() - world * 2**-8 * magnitude.float()
    assert excess.numel() == 0 or excess.max() <= 0, f"{what}: off by {excess.max():.3g} more than bf16 rounding allows"


def _check(name, world, results):
    ins = [_inputs(name, r, world) for r in range(world)]
    outs = [results[r][name][0] for r in range(world)]
    assert not any(results[r][name][1] for r in range(world)), f"{name}: the reference mutated its inputs"
    if name == "distributed_topk":
        _check_topk(ins, outs)
        return
    for r in range(world):
        expected = ORACLES[name](ins, r)
        assert len(outs[r]) == len(expected), f"{name} rank {r}: {len(outs[r])} outputs, expected {len(expected)}"
        if name in SUMMED:  # the same oracle on |x| gives Σ|x| in the output's layout
            magnitude = ORACLES[name]([tuple(a.abs() for a in args) for args in ins], r)
            for got, want, mag in zip(outs[r], expected, magnitude, strict=True):
                _assert_sum_close(got, want, mag, world, f"{name} rank {r}")
            continue
        tol = ZERO_STEP if name == "zero_reduce_scatter_then_all_gather" else dict(rtol=0, atol=0)
        for got, want in zip(outs[r], expected, strict=True):
            torch.testing.assert_close(got, want, **tol, msg=lambda m, r=r: f"{name} rank {r}: {m}")


@pytest.fixture(scope="module")
def on_2_ranks():
    return run_on_ranks(run_references, 2, ALL, SEED)


@pytest.fixture(scope="module")
def on_4_ranks():
    return run_on_ranks(run_references, 4, ALL, SEED)


@pytest.mark.parametrize("name", ALL)
def test_reference_matches_oracle_on_2_ranks(name, on_2_ranks):
    _check(name, 2, on_2_ranks)


@pytest.mark.parametrize("name", ALL)
def test_reference_matches_oracle_on_4_ranks(name, on_4_ranks):
    _check(name, 4, on_4_ranks)


def test_zero_step_applies_the_mean_gradient(on_2_ranks):
    # the fp32 update is far below bf16's tolerance, so check it alone: (new − old) / −LR is the mean gradient
    ins = [_inputs("zero_reduce_scatter_then_all_gather", r, 2) for r in range(2)]
    mean_grad = (_sum(g for _, g in ins) / 2).chunk(2)
    lr = _problem("zero_reduce_scatter_then_all_gather").LR
    for r in range(2):
        (_, new_master), _ = on_2_ranks[r]["zero_reduce_scatter_then_all_gather"]
        torch.testing.assert_close((ins[r][0] - new_master) / lr, mean_grad[r], **ZERO_STEP)


@pytest.mark.parametrize("name", ALL)
def test_inputs_are_deterministic_and_differ_by_rank(name):
    a, b, other = _inputs(name, 0, 2), _inputs(name, 0, 2), _inputs(name, 1, 2)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert any(not torch.equal(x, y) for x, y in zip(a, other, strict=True))


@pytest.mark.parametrize("name", ALL)
def test_contract(name):
    problem = _problem(name)
    assert len(problem.__doc__.strip().splitlines()) == 1 and " From " in problem.__doc__
    assert problem.CATEGORY in {"collective", "data-parallel", "expert-parallel", "long-tail"}
    assert next(iter(problem.SHAPES)) == "small" and len(problem.SHAPES) >= 2


UNEVEN = [  # a shape each problem cannot split over 2 ranks
    ("all_gather", dict(size_bytes=6)),  # 3 bf16 elements
    ("reduce_scatter", dict(size_bytes=6)),
    ("all_to_all", dict(size_bytes=6)),
    ("gather", dict(size_bytes=6)),
    ("scatter", dict(size_bytes=6)),
    ("all_reduce", dict(size_bytes=3)),  # not a whole bf16 element
    ("broadcast", dict(size_bytes=3)),
    ("reduce", dict(size_bytes=3)),
    ("send_recv", dict(size_bytes=3)),
    ("ddp_bucket_all_reduce", dict(size_bytes=3)),
    ("all_to_allv", dict(tokens=16, hidden=8, experts=3)),
    ("fsdp_all_gather_params", dict(numel=3)),
    ("fsdp_reduce_scatter_grads", dict(numel=3)),
    ("zero_reduce_scatter_then_all_gather", dict(numel=3)),
    ("halo_exchange", dict(height=3, width=4, channels=2, halo=1)),
    ("distributed_topk", dict(batch=2, vocab=3, k=1)),
    ("embedding_lookup", dict(tokens=4, vocab=3, hidden=8)),
]


@pytest.mark.parametrize(("name", "params"), UNEVEN, ids=[name for name, _ in UNEVEN])
def test_shape_that_does_not_split_raises_value_error(name, params):
    with pytest.raises(ValueError, match=r"^[^\n]+$"):
        _problem(name).inputs(0, 2, seed=SEED, device="cpu", **params)


@pytest.mark.parametrize("name", COLLECTIVES)
@pytest.mark.parametrize("world", [2, 8])
def test_workload_is_the_hand_written_collective(name, world):
    problem = _problem(name)
    for params in problem.SHAPES.values():
        w = problem.workload(world, **params)
        assert isinstance(w, Workload)
        (op,) = w.comm
        assert op.kind is COLLECTIVES[name]
        assert op.size_bytes == params["size_bytes"]
        assert op.group_size == (2 if name == "send_recv" else world)


def test_nccl_in_place_peers_give_the_reference_output():
    # the ecosystem's in-place NCCL all-reduce, broadcast and reduce (no copy of the input first) return what the
    # references (a copy, then NCCL on it) return, on every rank: the sum, rank 0's buffer, the sum on rank 0 only
    results = run_on_ranks(run_in_place_peers, 2, SEED)
    for rank, by_problem in enumerate(results):
        for name, (same, same_shape) in by_problem.items():
            assert same and same_shape, f"{name}, rank {rank}"
