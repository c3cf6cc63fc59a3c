"""Tensor-, sequence-, expert- and vocab-parallel and decode problems: each reference on 2 and 4 gloo ranks against
an oracle computed here in one process, with plain torch and no torch.distributed, from every rank's inputs."""

import pytest

torch = pytest.importorskip("torch")

from gloo import problem_module, run_on_ranks, run_references, small_inputs  # noqa: E402

SEED = 3
WORLDS = (2, 4)
PROBLEMS = [
    "all_gather_gemm",
    "gemm_reduce_scatter",
    "gemm_all_reduce",
    "tp_mlp_sequence_parallel",
    "all_reduce_rmsnorm",
    "reduce_scatter_rmsnorm",
    "ulysses_all_to_all_qkv",
    "ulysses_all_to_all_out",
    "ring_attention",
    "moe_dispatch",
    "moe_combine",
    "vocab_parallel_cross_entropy",
    "vocab_parallel_logprobs_topk",
    "decode_gemv_all_reduce",
]
CATEGORIES = {
    "all_gather_gemm": "tp-gemm",
    "gemm_reduce_scatter": "tp-gemm",
    "gemm_all_reduce": "tp-gemm",
    "tp_mlp_sequence_parallel": "tp-gemm",
    "all_reduce_rmsnorm": "tp-norm",
    "reduce_scatter_rmsnorm": "tp-norm",
    "ulysses_all_to_all_qkv": "sequence-parallel",
    "ulysses_all_to_all_out": "sequence-parallel",
    "ring_attention": "sequence-parallel",
    "moe_dispatch": "expert-parallel",
    "moe_combine": "expert-parallel",
    "vocab_parallel_cross_entropy": "vocab-parallel",
    "vocab_parallel_logprobs_topk": "vocab-parallel",
    "decode_gemv_all_reduce": "decode",
}
GEMM_BUILTINS = {"all_gather_gemm": "all-gather-gemm", "gemm_reduce_scatter": "gemm-reduce-scatter"}
GEMM_BUILTINS |= {"gemm_all_reduce": "gemm-all-reduce"}

# The references keep bf16 where the real code does (GEMM outputs, SwiGLU, gloo's bf16 sums); the oracles compute
# in fp32 from the same bf16 inputs. Outputs are O(1) by construction, and one bf16 rounding of an O(1) value is at
# most 2^-9 relative; the handful of such roundings on any path (P partial sums, intermediates) stay well inside
# 2e-2, i.e. about 5 bf16 ulps at 1.0.
BF16 = dict(rtol=2e-2, atol=2e-2)
# fp32 results (losses, log-probs) differ from the oracle only in summation order over at most 512 terms:
# a relative error of at most 512 · 2^-24 ≈ 3e-5 in a sum, far less in practice; log-probs are O(10).
FP32 = dict(rtol=3e-5, atol=3e-5)


def _problem(name):
    return problem_module(name)


def _inputs(name, rank, world):
    return small_inputs(name, rank, world, SEED)


@pytest.fixture(scope="module", params=WORLDS, ids=lambda world: f"{world}ranks")
def ranks(request):
    """(world size, each rank's {problem: (outputs, mutated)}): one gloo spawn per world size for all problems."""
    return request.param, run_on_ranks(run_references, request.param, tuple(PROBLEMS), SEED)


def _run(ranks, name):
    """(world size, every rank's inputs, every rank's outputs) for one problem; no reference may touch its inputs."""
    world, results = ranks
    outs = []
    for rank in range(world):
        out, mutated = results[rank][name]
        assert not mutated, f"{name}: rank {rank}'s reference changed its inputs"
        outs.append(out)
    return world, [_inputs(name, rank, world) for rank in range(world)], outs


def _rows(x, rank, world):
    """Rank `rank`'s contiguous block of x's first dimension."""
    return x.chunk(world)[rank]


def _rmsnorm(h, gamma, eps):
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()


# ---- tensor-parallel GEMMs: oracles are the unsharded matmuls ----


def test_all_gather_gemm(ranks):
    _, ins, outs = _run(ranks, "all_gather_gemm")
    a = torch.cat([a for a, _ in ins]).float()  # [tokens, in_features]: the gathered activations
    for (_, b), (c,) in zip(ins, outs, strict=True):
        assert c.dtype == torch.bfloat16
        torch.testing.assert_close(c.float(), a @ b.float(), **BF16)


def test_gemm_reduce_scatter(ranks):
    world, ins, outs = _run(ranks, "gemm_reduce_scatter")
    a = torch.cat([a for a, _ in ins], dim=1).float()  # [tokens, in_features]: K unsharded
    b = torch.cat([b for _, b in ins]).float()  # [in_features, out_features]
    for rank, (c,) in enumerate(outs):
        torch.testing.assert_close(c.float(), _rows(a @ b, rank, world), **BF16)


def test_gemm_all_reduce(ranks):
    _, ins, outs = _run(ranks, "gemm_all_reduce")
    a = torch.cat([a for a, _ in ins], dim=1).float()
    b = torch.cat([b for _, b in ins]).float()
    for (c,) in outs:
        assert c.shape == (a.shape[0], b.shape[1])
        torch.testing.assert_close(c.float(), a @ b, **BF16)


def test_tp_mlp_sequence_parallel(ranks):
    world, ins, outs = _run(ranks, "tp_mlp_sequence_parallel")
    x = torch.cat([x for x, _, _ in ins]).float()  # [tokens, hidden]
    gate = torch.cat([w.float().chunk(2, dim=1)[0] for _, w, _ in ins], dim=1)  # [hidden, ffn]
    up = torch.cat([w.float().chunk(2, dim=1)[1] for _, w, _ in ins], dim=1)
    down = torch.cat([w for _, _, w in ins]).float()  # [ffn, hidden]
    y = (torch.nn.functional.silu(x @ gate) * (x @ up)) @ down  # the unsharded SwiGLU MLP
    for rank, (out,) in enumerate(outs):
        torch.testing.assert_close(out.float(), _rows(y, rank, world), **BF16)


# ---- norms ----


def test_all_reduce_rmsnorm(ranks):
    _, ins, outs = _run(ranks, "all_reduce_rmsnorm")
    _, residual, gamma = ins[0]
    assert all(torch.equal(r, residual) and torch.equal(g, gamma) for _, r, g in ins), "replicated on every rank"
    h = torch.stack([p.float() for p, _, _ in ins]).sum(0) + residual.float()
    normed = _rmsnorm(h, gamma, _problem("all_reduce_rmsnorm").EPS)
    for out, new_residual in outs:
        torch.testing.assert_close(new_residual.float(), h, **BF16)
        torch.testing.assert_close(out.float(), normed, **BF16)


def test_reduce_scatter_rmsnorm(ranks):
    world, ins, outs = _run(ranks, "reduce_scatter_rmsnorm")
    total = torch.stack([p.float() for p, _, _ in ins]).sum(0)  # [tokens, hidden]
    eps = _problem("reduce_scatter_rmsnorm").EPS
    for rank, ((_, residual, gamma), (out, new_residual)) in enumerate(zip(ins, outs, strict=True)):
        h = _rows(total, rank, world) + residual.float()
        torch.testing.assert_close(new_residual.float(), h, **BF16)
        torch.testing.assert_close(out.float(), _rmsnorm(h, gamma, eps), **BF16)


# ---- sequence / context parallel ----


def test_ulysses_all_to_all_qkv(ranks):
    world, ins, outs = _run(ranks, "ulysses_all_to_all_qkv")
    full = [torch.cat([rank_inputs[i] for rank_inputs in ins]) for i in range(3)]  # q, k, v: [seq, heads, dim]
    for rank, out in enumerate(outs):
        for got, whole in zip(out, full, strict=True):
            assert torch.equal(got, whole.chunk(world, dim=1)[rank])  # all of the sequence, this rank's heads


def test_ulysses_all_to_all_out(ranks):
    world, ins, outs = _run(ranks, "ulysses_all_to_all_out")
    whole = torch.cat([o for (o,) in ins], dim=1)  # [seq, heads, dim]: rank r computed head group r
    for rank, (out,) in enumerate(outs):
        assert torch.equal(out, _rows(whole, rank, world))


def test_ring_attention(ranks):
    world, ins, outs = _run(ranks, "ring_attention")
    q, k, v = (torch.cat([rank_inputs[i] for rank_inputs in ins]).float().transpose(0, 1) for i in range(3))
    full = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True).transpose(0, 1)  # non-causal
    for rank, (out,) in enumerate(outs):
        assert out.dtype == torch.bfloat16
        torch.testing.assert_close(out.float(), _rows(full, rank, world), **BF16)


# ---- expert parallel: oracles walk the routing in plain Python ----


def _expert_rows(ins, world):
    """{(expert, source rank, token): (owner rank, row)}: where each routed token sits on its expert's rank,
    ordered by local expert, then source rank, then token."""
    num_experts = ins[0][1].shape[1]
    local = num_experts // world
    where = {}
    for owner in range(world):
        row = 0
        for expert in range(owner * local, (owner + 1) * local):
            for source, rank_inputs in enumerate(ins):
                for token in rank_inputs[1][:, expert].nonzero().flatten().tolist():
                    where[expert, source, token] = (owner, row)
                    row += 1
    return where


def test_moe_dispatch(ranks):
    world, ins, outs = _run(ranks, "moe_dispatch")
    topk = _problem("moe_dispatch").SHAPES["small"]["topk"]
    assert all((routing_map.sum(1) == topk).all() for _, routing_map in ins)
    where = _expert_rows(ins, world)
    local = ins[0][1].shape[1] // world
    for owner, (tokens, per_expert) in enumerate(outs):
        rows = sorted((row, expert, source, token) for (expert, source, token), (o, row) in where.items() if o == owner)
        assert [row for row, *_ in rows] == list(range(tokens.shape[0]))
        assert torch.equal(tokens, torch.stack([ins[source][0][token] for _, _, source, token in rows]))
        expected_counts = [
            sum(e == expert for _, e, _, _ in rows) for expert in range(owner * local, (owner + 1) * local)
        ]
        assert per_expert.tolist() == expected_counts
    assert len({tokens.shape[0] for tokens, _ in outs}) > 1, "uneven splits: ranks receive different token counts"


def test_moe_combine(ranks):
    world, ins, outs = _run(ranks, "moe_combine")
    where = _expert_rows(ins, world)
    for owner, (expert_out, _, _) in enumerate(ins):
        assert expert_out.shape[0] == sum(o == owner for o, _ in where.values())
    for source, ((_, routing_map, probs), (out,)) in enumerate(zip(ins, outs, strict=True)):
        torch.testing.assert_close(probs.sum(1), torch.ones(probs.shape[0]))
        expected = torch.zeros(out.shape)
        for token, expert in routing_map.nonzero().tolist():
            owner, row = where[expert, source, token]
            expected[token] += probs[token, expert] * ins[owner][0][row].float()
        torch.testing.assert_close(out.float(), expected, **BF16)


# ---- vocab parallel and decode ----


def test_vocab_parallel_cross_entropy(ranks):
    _, ins, outs = _run(ranks, "vocab_parallel_cross_entropy")
    logits = torch.cat([z for z, _ in ins], dim=1).float()  # [tokens, vocab]
    target = ins[0][1]
    expected = torch.nn.functional.cross_entropy(logits, target, reduction="none")
    for (loss,) in outs:
        assert loss.dtype == torch.float32
        torch.testing.assert_close(loss, expected, **FP32)


def test_vocab_parallel_logprobs_topk(ranks):
    _, ins, outs = _run(ranks, "vocab_parallel_logprobs_topk")
    k = _problem("vocab_parallel_logprobs_topk").TOPK
    logprobs = torch.log_softmax(torch.cat([z for z, _ in ins], dim=1).float(), dim=-1)  # [tokens, vocab]
    target = ins[0][1]
    for logprob, top_values, top_ids in outs:
        torch.testing.assert_close(logprob, logprobs.gather(1, target[:, None]).squeeze(1), **FP32)
        torch.testing.assert_close(top_values, logprobs.topk(k, dim=-1).values, **FP32)
        # bf16 logits tie often, so check the ids name the returned values rather than match topk's tie order
        torch.testing.assert_close(logprobs.gather(1, top_ids), top_values, **FP32)
        assert all(len(set(row)) == k for row in top_ids.tolist())


def test_decode_gemv_all_reduce(ranks):
    _, ins, outs = _run(ranks, "decode_gemv_all_reduce")
    x = torch.cat([x for x, _ in ins], dim=1).float()  # [batch, in_features]
    weight = torch.cat([w for _, w in ins], dim=1).float()  # [out_features, in_features]
    for (y,) in outs:
        torch.testing.assert_close(y.float(), x @ weight.t(), **BF16)


# ---- the contract, errors and hand-written workloads ----


@pytest.mark.parametrize("name", PROBLEMS)
def test_follows_the_contract(name):
    problem = _problem(name)
    docstring = problem.__doc__.strip()
    assert "\n" not in docstring and " From " in docstring and "::" in docstring
    assert CATEGORIES[name] == problem.CATEGORY
    assert next(iter(problem.SHAPES)) == "small"
    assert problem.SOURCE.split(":")[0].count("/") == 1  # "owner/repo: path::function"


@pytest.mark.parametrize("name", [n for n in PROBLEMS if n != "all_reduce_rmsnorm"])  # it splits nothing
def test_shapes_that_do_not_divide_raise_a_one_line_value_error(name):
    problem = _problem(name)
    with pytest.raises(ValueError, match="is not divisible by the world size 3") as caught:
        problem.inputs(0, 3, seed=SEED, device="cpu", **problem.SHAPES["small"])
    assert "\n" not in str(caught.value)


# Llama-3-70B's MLP at TP=8 on 8192 tokens: hidden 8192, FFN 28672. The down projection (row-parallel) has
# k = 28672 / 8 = 3584 per rank and n = 8192; gate and up fused (column-parallel) have n = 2 · 28672 / 8 = 7168.
LLAMA3_70B_TP8 = {
    "all_gather_gemm": {"m": 8192, "n": 7168, "k": 8192},
    "gemm_reduce_scatter": {"m": 8192, "n": 8192, "k": 3584},
    "gemm_all_reduce": {"m": 8192, "n": 8192, "k": 3584},
}


@pytest.mark.parametrize(("name", "builtin"), GEMM_BUILTINS.items())
def test_workload_at_llama3_70b_tp8_is_llama3_70bs_mlp(name, builtin):
    workload = _problem(name).workload(8, **_problem(name).SHAPES["llama3-70b-tp8"])
    assert workload.name == builtin
    assert workload.params == LLAMA3_70B_TP8[name]


def test_workloads_map_shapes_onto_the_builtin_layouts():
    world = 4
    gathered = _problem("all_gather_gemm").workload(world, tokens=64, in_features=128, out_features=256)
    assert gathered.params == {"m": 64, "n": 256 // world, "k": 128}  # n: this rank's output columns
    scattered = _problem("gemm_reduce_scatter").workload(world, tokens=64, in_features=256, out_features=128)
    assert scattered.params == {"m": 64, "n": 128, "k": 256 // world}  # k: this rank's slice of the inner dim
    reduced = _problem("gemm_all_reduce").workload(world, tokens=64, in_features=256, out_features=128)
    assert reduced.params == {"m": 64, "n": 128, "k": 256 // world}


@pytest.mark.parametrize("name", GEMM_BUILTINS)
def test_workload_rejects_shapes_that_do_not_divide(name):
    with pytest.raises(ValueError, match="is not divisible by the world size 3"):
        _problem(name).workload(3, **_problem(name).SHAPES["small"])
