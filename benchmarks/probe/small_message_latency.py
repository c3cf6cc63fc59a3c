#!/usr/bin/env python3
"""Small-message latency probes between two GPUs of one host (written for 2x H200, NVLink/NVSwitch).

torch, triton and the standard library, with pkroof's multicast guard, PTX helpers and busbw factors.  It starts one
process per GPU itself (torch.multiprocessing spawn, NCCL, MASTER_ADDR=127.0.0.1) and measures:

  a. peer copies through torch's copy_ (cudaMemcpyAsync; the driver picks the engine) of 4 B / 4 KiB /
     64 KiB, pulled from and pushed to the peer's symmetric-memory buffer: per copy inside a CUDA graph of
     100 copies, eager per call (100 back-to-back calls), and one isolated call + synchronize (host clock);
  b. one-way NVLink latency by a flag ping-pong: one CTA per GPU, N round trips in one launch;
  c. SM-store small message (4 KiB / 64 KiB) written with plain stores by one CTA + a release flag,
     answered by a flag: round trip, minus the one-way flag latency of (b);
  d. NCCL all_reduce (8 B fp32, 64 KiB and 64 MiB bf16) and all_gather_into_tensor (64 MiB output) inside
     a CUDA graph of 20 calls and eager (20 back-to-back calls), with nccl-tests busbw;
  e. torch.ops.symm_mem.one_shot_all_reduce at 4 KiB inside a CUDA graph (and eager).

Every measurement has warm-up, >= 20 samples timed with CUDA events (except the host-clock "isolated"
row), and reports median / min / max; raw samples go to $OUT/latency.json when OUT is set.

NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 are forced below, before torch is imported.  Every GPU spin loop has a poll cap.

Usage:  python3 benchmarks/probe/small_message_latency.py        (needs 2 GPUs)

Modules beside it, each read top to bottom: latency_kernels.py (the Triton kernels and the buffer layout),
latency_harness.py (constants, per-rank context, timing), latency_p2p.py (parts a-c), latency_collectives.py (d, e).
"""

from __future__ import annotations

import os

from pkroof.runtime.launch import SAFE_ENV as _SAFE_ENV
from pkroof.runtime.launch import keep_multicast_off

for _key, _val in _SAFE_ENV.items():
    if os.environ.get(_key, _val) != _val:  # never run with multicast on, whatever the caller's environment says
        print(f"[latency] overriding {_key}={os.environ[_key]!r} -> {_val!r}", flush=True)
keep_multicast_off()

import json  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import triton  # noqa: E402
from latency_collectives import part_nccl, part_one_shot  # noqa: E402
from latency_harness import (  # noqa: E402
    COLL_CALLS,
    EAGER_CALLS,
    GRAPH_COPIES,
    PP_ITERS,
    SAMPLES,
    WARMUP,
    WORLD,
    Ctx,
    run_part,
)
from latency_kernels import MAX_POLLS  # noqa: E402
from latency_p2p import part_copy, part_message, part_pingpong, part_setup  # noqa: E402

GLOO_TIMEOUT_S = 120
DEADLINE_S = float(os.environ.get("LATENCY_DEADLINE_S", "300"))


# ----------------------------------------------------------------------------------------------------------
# process plumbing
# ----------------------------------------------------------------------------------------------------------


def _worker(rank: int, port: int, result_path: str) -> None:
    keep_multicast_off()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # host-side barriers stay on the loopback interface
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", rank=rank, world_size=WORLD, timeout=timedelta(seconds=180), device_id=torch.device("cuda", rank)
    )
    gloo = dist.new_group(backend="gloo", timeout=timedelta(seconds=GLOO_TIMEOUT_S))
    ctx = Ctx(rank, gloo, result_path)
    if rank == 0:
        nccl_v = torch.cuda.nccl.version()
        ctx.results["env"] = {
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "nccl": ".".join(map(str, nccl_v)) if isinstance(nccl_v, tuple) else str(nccl_v),
            "triton": triton.__version__,
            "python": sys.version.split()[0],
            "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
            "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
            "safe_env": {k: os.environ.get(k) for k in _SAFE_ENV},
        }
        ctx.log(f"env: {ctx.results['env']}")
        ctx.save()
    run_part(ctx, "setup (symmetric memory)", part_setup)
    have_symm = ctx.results["parts"].get("setup (symmetric memory)", {}).get("ok", False)
    sync_ok: list[Any] = [have_symm]
    dist.broadcast_object_list(sync_ok, src=0, group=gloo)
    if sync_ok[0]:
        run_part(ctx, "a copy engine", part_copy)
        run_part(ctx, "b flag ping-pong", part_pingpong)
        if ctx.results["parts"]["b flag ping-pong"]["ok"]:  # the same on both ranks
            run_part(ctx, "c SM-store message", part_message)
    else:
        ctx.log("symmetric memory unavailable: parts a, b, c skipped")
    run_part(ctx, "d NCCL", part_nccl)
    run_part(ctx, "e symm_mem one_shot_all_reduce", part_one_shot)
    ctx.results["done"] = True
    ctx.save()
    ctx.log("done")
    # No destroy_process_group(): on the first device run the orderly teardown (gloo barrier + destroy, with
    # CUDA graphs holding NCCL work still alive) never returned. Every collective has completed by now and the
    # results are saved, so each worker leaves at once and the driver frees its resources.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _results_done(path: str) -> bool:
    try:
        with open(path) as f:
            return bool(json.load(f).get("done"))
    except Exception:
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sh(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return f"({cmd[0]} failed: {e})"


def _fmt(x: float) -> str:
    return f"{x:10.3f}" if x < 1e5 else f"{x:10.0f}"


def print_table(res: dict[str, Any]) -> None:
    print("\n== results (µs; median over samples, [min, max]) ==")
    print(f"{'part':5} {'measurement':92} {'median':>10} {'min':>10} {'max':>10}  {'n':>3}  extra")
    for r in res.get("rows", []):
        st = r.get("stats")
        extra = []
        if "busbw_GBps" in r and r["busbw_GBps"] >= 0.01:
            extra.append(f"busbw {r['busbw_GBps']:.2f} GB/s")
        if "mean_polls_per_wait" in r:
            extra.append(f"extra polls/wait {r['mean_polls_per_wait']:.1f}")
        if r.get("note"):
            extra.append(r["note"])
        if st is None:
            print(f"{r['part']:5} {r['name']:92} {'-':>10} {'-':>10} {'-':>10}  {'-':>3}  {'; '.join(extra)}")
        else:
            print(
                f"{r['part']:5} {r['name']:92} {_fmt(st['median_us'])} {_fmt(st['min_us'])} "
                f"{_fmt(st['max_us'])}  {st['n']:3d}  {'; '.join(extra)}"
            )
    print("\n== parts ==")
    for name, p in res.get("parts", {}).items():
        status = "ok" if p["ok"] else "FAILED"
        print(f"{name:40} {status:7} {p['seconds']:7.1f} s")
        for e in p.get("errors", []):
            print("    " + e.strip().replace("\n", "\n    "))


def main() -> int:
    if not torch.cuda.is_available() or torch.cuda.device_count() < WORLD:
        print(f"need {WORLD} CUDA GPUs, found {torch.cuda.device_count() if torch.cuda.is_available() else 0}")
        return 2
    started = datetime.now(UTC).isoformat(timespec="seconds")
    smi = _sh(
        [
            "nvidia-smi",
            "--query-gpu=index,name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,power.limit",
            "--format=csv",
        ]
    )
    topo = _sh(["nvidia-smi", "topo", "-m"])
    print(f"[latency] start {started}\n{smi}\n{topo}", flush=True)
    fd, result_path = tempfile.mkstemp(prefix="latency_", suffix=".json")
    os.close(fd)
    port = _free_port()
    pctx = mp.start_processes(_worker, args=(port, result_path), nprocs=WORLD, join=False, start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    rc = 0
    while True:
        try:
            if pctx.join(timeout=5):
                break
        except Exception as e:
            print(f"[latency] a worker failed: {e}", flush=True)
            rc = 1
            break
        if _results_done(result_path):  # the workers should be gone already; give them a few seconds
            deadline = min(deadline, time.monotonic() + 20)
        if time.monotonic() > deadline:
            print("[latency] deadline passed; terminating the workers", flush=True)
            for p in pctx.processes:
                if p.is_alive():
                    p.terminate()
            rc = 1
            break
    try:
        with open(result_path) as f:
            res: dict[str, Any] = json.load(f)
    except Exception as e:
        print(f"[latency] no results: {e}")
        res = {"parts": {}, "rows": []}
    res["started_utc"] = started
    res["nvidia_smi"] = smi
    res["topo"] = topo
    res["command"] = " ".join([sys.executable, *sys.argv])
    res["constants"] = {
        "samples": SAMPLES,
        "warmup": WARMUP,
        "pingpong_iters": PP_ITERS,
        "graph_copies": GRAPH_COPIES,
        "eager_calls": EAGER_CALLS,
        "coll_calls": COLL_CALLS,
        "max_polls": MAX_POLLS,
    }
    print_table(res)
    out_dir = os.environ.get("OUT")
    if out_dir:
        with open(os.path.join(out_dir, "latency.json"), "w") as f:
            json.dump(res, f, indent=1)
        print(f"[latency] wrote {os.path.join(out_dir, 'latency.json')}")
    if any(not p["ok"] for p in res.get("parts", {}).values()):
        rc = rc or 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
