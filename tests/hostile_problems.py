"""Sources of problem files that misbehave while pkroof imports or analyses them (tests write them to a folder)."""

HEAD = """
import os, sys, time
from pathlib import Path

def _say(what):
    if os.environ.get("TEST_PIDS"):
        Path(os.environ["TEST_PIDS"], f"{what}-{os.getpid()}").write_text(str(os.getpid()))

def inputs(rank, world_size, *, seed, device, n=64):
    import torch
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return torch.randn(n, generator=g).to(device)
"""
REFERENCE = """
def reference(x):
    import torch.distributed as dist
    out = x.clone()
    dist.all_reduce(out)
    return out
"""

SOURCES = {
    "loops_at_import": HEAD + REFERENCE + "_say('import')\nwhile True:\n    pass\n",
    "sleeps_at_import": HEAD + REFERENCE + "_say('import')\ntime.sleep(3600)\n",
    "exits_0_at_import": HEAD + REFERENCE + "os._exit(0)\n",
    "system_exit_at_import": HEAD + REFERENCE + "raise SystemExit(0)\n",
    "system_exit_3_at_import": HEAD + REFERENCE + "sys.exit(3)\n",
    "keyboard_interrupt_at_import": HEAD + REFERENCE + "raise KeyboardInterrupt\n",
    "segfaults_at_import": HEAD + REFERENCE + "import signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    "forks_a_daemon_at_import": HEAD
    + REFERENCE
    + "_say('import')\nif os.fork() == 0:\n    os.setsid()\n    _say('daemon')\n    time.sleep(600)\n    os._exit(0)\n"
    + "time.sleep(3600)\n",
    "escapes_at_import": HEAD + REFERENCE + "raise RuntimeError('\\x1b[31mred\\x1b]0;owned\\x07 \\x1b[2Jgone')\n",
    "reference_hangs_when_traced": HEAD
    + "def reference(x):\n    _say('trace')\n    while True:\n        time.sleep(0.1)\n",
    "workload_hangs": HEAD
    + REFERENCE
    + "def workload(world_size, *, n):\n    _say('workload')\n    time.sleep(3600)\n",
    "workload_is_a_dict": HEAD + REFERENCE + "def workload(world_size, *, n):\n    return {'comm': []}\n",
    "workload_is_empty": HEAD
    + REFERENCE
    + "from pkroof.rooflines import Workload\ndef workload(world_size, *, n):\n    return Workload(name='nothing')\n",
    "workload_has_nan": HEAD
    + REFERENCE
    + "from pkroof.rooflines import Workload\n"
    + "def workload(world_size, *, n):\n    return Workload(name='w', hbm_bytes=float('nan'))\n",
    "workload_negative_flops": HEAD
    + REFERENCE
    + "from pkroof.rooflines import Workload, ComputeOp\n"
    + "def workload(world_size, *, n):\n"
    + "    return Workload(name='w', compute=(ComputeOp('mm', -1e12, 'bf16', 1e6),), hbm_bytes=1e6)\n",
    "inputs_hang": HEAD.replace("def inputs(", "def _inputs(")
    + REFERENCE
    + "def workload(world_size, *, n=64):\n    from pkroof.rooflines import Workload\n"
    + "    return Workload(name='w', hbm_bytes=1e6)\n"
    + "def inputs(rank, world_size, *, seed, device, n=64):\n    _say('inputs')\n    time.sleep(3600)\n",
}
