"""Implementations of user_gemm_all_reduce for the profiler's tests: right, wrong, hanging, crashing."""

import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist

from pkroof.kernels.declare import declare, report_comm_sms


def correct(a, b):  # the same maths in another order: (a @ b) summed over ranks
    out = torch.mm(a, b)
    dist.all_reduce(out)
    return out


def _dies_first(dying: int) -> None:
    """Rank `dying` is about to die; every other rank waits here until that rank's process (its guard, the worker's
    parent) has ended, so pkroof sees it end before a peer fails on the broken connection: which rank is named
    does not depend on timing (a busy machine once let the peer's error arrive first)."""
    store = dist.distributed_c10d._get_default_store()
    if dist.get_rank() == dying:
        store.set("dying-guard", str(os.getppid()))
        return
    guard = int(store.get("dying-guard"))
    while _running(guard):
        time.sleep(0.01)


def _running(pid: int) -> bool:
    """The process is there and not a zombie (one that ended, not yet reaped by pkroof)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wrong(a, b):  # forgets the all-reduce: each rank returns only its partial sum
    return a @ b


def unwritten(a, b):  # returns memory it never wrote
    return torch.empty(a.shape[0], b.shape[1])


def hangs(a, b):  # rank 0 waits for a collective nobody else joins: the classic deadlock
    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(1))
    time.sleep(3600)
    return a @ b


def crashes(a, b):
    raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")


def exits_quietly(a, b):  # every rank leaves without a word or a result, as a stray os._exit(0) would
    os._exit(0)


def rank_1_exits(a, b):  # rank 1 leaves quietly; rank 0 then fails in the all-reduce on the broken connection
    _dies_first(1)
    if dist.get_rank() == 1:
        os._exit(0)
    return correct(a, b)


def rank_1_segfaults(a, b):
    _dies_first(1)
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    return correct(a, b)


def wrong_on_rank_1(a, b):  # right on rank 0, off by one in one element on rank 1
    out = correct(a, b)
    if dist.get_rank() == 1:
        out[0, 0] += 1
    return out


def hangs_saying_its_pid(a, b):  # every rank writes its process id into $TEST_RANK_PIDS, then hangs
    Path(os.environ["TEST_RANK_PIDS"], str(dist.get_rank())).write_text(str(os.getpid()))
    time.sleep(3600)
    return a @ b


@declare(mechanism="sm-store", schedule="inter-sm", comm_sms=8)
def declared_pair(a, b):  # the same maths as `correct`, saying which (mechanism, schedule) it would be on GPUs
    return correct(a, b)


@declare(mechanism="sm-store", schedule="inter-sm", comm_sms=8)
def reports_comm_sms(a, b):  # as `declared_pair`, but says at each call that it took 12 SMs for this shape
    report_comm_sms(reports_comm_sms, 12)
    return correct(a, b)


def one_part_in_a_thousand_high(a, b):  # fp32: outside the default rtol (1.3e-5), inside --rtol 2e-3
    out = (a @ b) * 1.001
    dist.all_reduce(out)
    return out


def prints_to_stdout(a, b):  # right, and chatty: what it prints must not land in pkroof's table
    print(f"chatty rank {dist.get_rank()}")
    return correct(a, b)
