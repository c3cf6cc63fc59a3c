"""Implementations of user_gemm_all_reduce that cheat the clock: each is right while pkroof checks it and wrong, or
not computing at all, while it is timed. The profiler must record every one `incorrect` and never time it."""

import os
import threading
from pathlib import Path

import torch
import torch.distributed as dist


def _right(a, b):
    out = a @ b
    dist.all_reduce(out)
    return out


_calls = {"n": 0}


def right_for_5_calls_then_zeros(a, b):  # the 3 checks and 2 warm-up calls, then nothing computed
    _calls["n"] += 1
    return _right(a, b) if _calls["n"] <= 5 else torch.zeros(a.shape[0], b.shape[1], device=a.device)


def right_for_11_calls_then_the_last_answer(a, b):  # a few timed samples right, then replays its last output
    _calls["n"] += 1
    if _calls["n"] <= 11:
        _calls["last"] = _right(a, b)
    return _calls["last"]


_by_pointer: dict = {}


def cached_by_storage_pointer(a, b):  # the answer for these buffers, whatever they now hold
    key = (a.data_ptr(), b.data_ptr())
    if key not in _by_pointer:
        _by_pointer[key] = _right(a, b)
    return _by_pointer[key]


_by_values: dict = {}


def cached_by_pointer_and_two_values(a, b):  # the cache the first review found: a hit needs equal corner values
    key = (a.data_ptr(), b.data_ptr(), float(a[0, 0]), float(b[-1, -1]))
    hit = key in _by_values
    if not hit:
        _by_values[key] = _right(a, b)
    if hit and os.environ.get("TEST_CACHE_HITS"):
        with Path(os.environ["TEST_CACHE_HITS"], str(dist.get_rank())).open("a") as f:
            f.write(Path(os.environ["PKROOF_RANK_PHASE"]).read_text() + "\n")
    return _by_values[key]


def right_only_while_the_phase_says_check(a, b):  # reads pkroof's own phase file
    phase = Path(os.environ["PKROOF_RANK_PHASE"]).read_text() if "PKROOF_RANK_PHASE" in os.environ else ""
    return _right(a, b) if "check" in phase else torch.zeros(a.shape[0], b.shape[1], device=a.device)


_seen: list = []  # the tensors themselves: kept alive, so no later allocation can reuse their addresses


def right_on_freshly_allocated_inputs(a, b):  # the checks hand it new tensors; timing reuses buffers
    if any(a.data_ptr() == t.data_ptr() for t in _seen):
        return torch.zeros(a.shape[0], b.shape[1], device=a.device)
    _seen.append(a)
    return _right(a, b)


def returns_at_once_and_writes_later(a, b):  # the clock stops at return; a thread fills the output afterwards
    if _calls["n"] < 3:
        _calls["n"] += 1
        return _right(a, b)
    out = torch.zeros(a.shape[0], b.shape[1], device=a.device)
    partial = a @ b

    def later():
        threading.Event().wait(0.05)
        out.copy_(partial * dist.get_world_size())  # close to right for a test whose ranks' partials agree

    threading.Thread(target=later, daemon=True).start()
    return out


def wrong_on_one_rank_after_the_checks(a, b):  # rank 1 drops its result once the checks are over (in step)
    _calls["n"] += 1
    out = _right(a, b)
    return out * 0 if dist.get_rank() == 1 and _calls["n"] > 3 else out
