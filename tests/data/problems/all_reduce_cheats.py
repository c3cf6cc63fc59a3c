"""Implementations of the suite's all-reduce that cheat the clock (the profiler must record them `incorrect`)."""

import torch.distributed as dist

_calls = {"n": 0}


def right_for_3_calls_then_its_input(x):  # the first review's 352x "speed-up": the checks, then nothing at all
    _calls["n"] += 1
    if _calls["n"] > 3:
        return x
    out = x.clone()
    dist.all_reduce(out)
    return out


def in_place(x):  # reduces its input in place and returns it: allowed, and right every time
    dist.all_reduce(x)
    return x
