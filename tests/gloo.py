"""Run a function on N CPU ranks joined by gloo: each rank's return value comes back to the test, in rank order.

    results = run_on_ranks(check_problem, 2, "all_reduce")   # check_problem(rank, world_size, *args) -> picklable

The function must live at module level in an importable module (tests/ is on sys.path under pytest).
"""

from __future__ import annotations

import multiprocessing
import pickle
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(fn: Callable, rank: int, world: int, port: int, folder: str, args: tuple) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        result = fn(rank, world, *args)
    finally:
        dist.barrier()
        dist.destroy_process_group()
    Path(folder, f"{rank}.pickle").write_bytes(pickle.dumps(result))


def run_on_ranks(fn: Callable, world: int, *args: object, timeout_s: float = 120) -> list:
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        port = _free_port()
        procs = [ctx.Process(target=_rank_main, args=(fn, r, world, port, folder, args)) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout_s)
        for p in procs:
            if p.is_alive():
                p.kill()
        codes = [p.exitcode for p in procs]
        if any(code != 0 for code in codes):
            raise RuntimeError(f"ranks exited with {codes}; their errors are printed above")
        return [pickle.loads(Path(folder, f"{r}.pickle").read_bytes()) for r in range(world)]


def problem_module(name: str):
    """A suite problem's module by file name ("all_reduce")."""
    import importlib

    return importlib.import_module(f"pkroof.kernels.problems.{name}")


def small_inputs(name: str, rank: int, world: int, seed: int) -> tuple:
    """Rank `rank`'s inputs at the problem's "small" shape (deterministic in seed and rank)."""
    problem = problem_module(name)
    made = problem.inputs(rank, world, seed=seed, device="cpu", **problem.SHAPES["small"])
    return made if isinstance(made, tuple) else (made,)


def run_references(rank: int, world: int, names: tuple, seed: int) -> dict:
    """On each gloo rank: every problem's reference at "small", and whether it left its inputs alone."""
    import torch

    results = {}
    for name in names:
        args = small_inputs(name, rank, world, seed)
        before = [a.clone() for a in args]
        out = problem_module(name).reference(*args)
        mutated = any(not torch.equal(a, b) for a, b in zip(args, before, strict=True))
        results[name] = (out if isinstance(out, tuple) else (out,), mutated)
    return results


def run_in_place_peers(rank: int, world: int, seed: int) -> dict:
    """On each gloo rank: the NCCL-in-place peers (kernels/ecosystem.py) against their problem's reference, each on its
    own copy of this rank's inputs: {problem: (same output, same shape)}."""
    import torch

    from pkroof.kernels import ecosystem

    peers = {
        "all_reduce": ecosystem.nccl_all_reduce_in_place,
        "broadcast": ecosystem.nccl_broadcast_in_place,
        "reduce": ecosystem.nccl_reduce_in_place,
    }
    results = {}
    for name, peer in peers.items():
        args = small_inputs(name, rank, world, seed)
        want = problem_module(name).reference(*[a.clone() for a in args])
        got = peer(*[a.clone() for a in args])
        results[name] = (torch.equal(got, want), got.shape == want.shape)
    return results
