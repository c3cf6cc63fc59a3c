"""Implementations of the suite's all-reduce (one tensor) for the launched-profile tests: two torchrun "nodes" of 2
ranks each, so global ranks 2 and 3 are node 1's. Each fault lands on node 1 while rank 0, which records, is on
node 0."""

import os
import signal
import time
from pathlib import Path

import torch.distributed as dist


def correct(x):
    out = x.clone()
    dist.all_reduce(out)
    return out


def killed_on_node_1(x):  # rank 2 dies of SIGKILL mid-job (the OOM killer's signal): its peers wait for it
    if dist.get_rank() == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return correct(x)


def hangs_on_node_1(x):  # rank 2 never joins the all-reduce: the classic deadlock, across nodes
    if dist.get_rank() == 2:
        time.sleep(3600)
    return correct(x)


def wrong_on_node_1(x):  # right everywhere but rank 3, off by one in one element
    out = correct(x)
    if dist.get_rank() == 3:
        out[0] += 1
    return out


def waits_on_node_1(x):  # rank 2 says it has started (a file in $LAUNCH_TEST_DIR), then hangs: the test kills its node
    if dist.get_rank() == 2:
        Path(os.environ["LAUNCH_TEST_DIR"], "rank-2-started").write_text(str(os.getpid()))
        time.sleep(3600)
    return correct(x)


def crashes_on_rank_1(x):  # the GPU form's second node is rank 1: it dies of SIGSEGV
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    return correct(x)
