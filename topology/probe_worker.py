"""One rank of `pkroof probe`: measure transfer curves, collectives, latency and local ceilings; rank 0 saves them.

Pairwise transfers run between ranks 0 and 1 (on an NVSwitch node every pair sees the same fabric); collectives
use every rank. Each point: warm-up, then `samples` CUDA-event timings of a CUDA-graph replay (eager where a
graph cannot be captured), median and 10th/90th percentiles kept, and the bytes moved checked afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

import torch
import torch.distributed as dist

from pkroof.rooflines import Collective, bus_bandwidth_factor
from pkroof.runtime.gpu_state import watches
from pkroof.runtime.launch import ALLOW_MULTICAST, PORT_TAKEN_EXIT, keep_multicast_off
from pkroof.runtime.timing import Timing, time_device

from .copy_kernels import pingpong, sm_copy, tma_copy
from .model import Curve
from .probe_plan import Plan, calls_per_sample, pair_rounds

SUSTAINED_SAMPLE_S = 0.05  # of back-to-back matmuls per sustained sample (2xH200: 16 ms ones ran 2% faster than 49 ms)

KiB, MiB, GiB = 1024, 1024**2, 1024**3


def _pattern(n: int, rank: int, device: torch.device) -> torch.Tensor:
    return torch.arange(n, dtype=torch.int32, device=device) * 7 + (rank + 1) * 1_000_003


class Rank:
    def __init__(self, rank: int, world: int, local_world: int, plan: Plan, log: Callable[[str], None]) -> None:
        import torch.distributed._symmetric_memory as symm_mem

        self.rank, self.world, self.local_world, self.plan, self.log = rank, world, local_world, plan, log
        self.nodes = world // local_world
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.sm_count = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.n_max = max(max(plan.sizes), plan.cta_sweep_bytes) // 4  # int32 elements
        self.curves: list[Curve] = []
        self.ceilings: dict[str, float] = {}
        self.pairs: dict[str, float] = {}
        self.notes: list[str] = []
        # every rank joins every group it is not in, as torch requires of group creation; one GPU has no pair
        self.pair = dist.new_group([0, 1]) if world > 1 else None
        self.node_group = None
        if local_world > 1:
            self.node_group, _ = dist.new_subgroups(group_size=local_world)
        self.inter = dist.new_group([0, local_world]) if self.nodes > 1 else None
        self.peer = 1 - rank if (rank < 2 and local_world > 1) else None
        if self.node_group is not None:
            # symmetric buffer, shared by the GPUs of one node: [ source (pattern) | destination | 1 guard word ]
            self.buf = symm_mem.empty(2 * self.n_max + 1, dtype=torch.int32, device=self.device)
            self.handle = symm_mem.rendezvous(self.buf, self.node_group.group_name)
            self.src = self.buf[: self.n_max]
            self.dst = self.buf[self.n_max : 2 * self.n_max + 1]
            self.src.copy_(_pattern(self.n_max, rank, self.device))
        if self.peer is not None:
            self.peer_src, self.peer_dst = self._peer_regions(self.peer % local_world)
        torch.cuda.synchronize()
        dist.barrier()

    def _peer_regions(self, local_peer: int) -> tuple[torch.Tensor, torch.Tensor]:
        peer_buf = self.handle.get_buffer(local_peer, (2 * self.n_max + 1,), torch.int32)
        return peer_buf[: self.n_max], peer_buf[self.n_max : 2 * self.n_max + 1]

    # ---- helpers ----

    def _poison(self, dst: torch.Tensor) -> None:
        dst.fill_(-1)

    def _check(self, dst: torch.Tensor, n: int, src_rank: int) -> bool:
        """dst[:n] holds src_rank's pattern and the word after it is untouched."""
        return bool(torch.equal(dst[:n], _pattern(n, src_rank, self.device)) and int(dst[n]) == -1)

    def _curve(
        self,
        name: str,
        mechanism: str,
        direction: str,
        sweep: str,
        x: list[float],
        timings: list[Timing],
        *,
        num_ctas: int = 0,
        size_bytes: int = 0,
        verified: bool = True,
    ) -> Curve:
        curve = Curve(
            name,
            mechanism,
            direction,
            sweep,
            num_ctas,
            size_bytes,
            timings[0].mode,
            tuple(x),
            tuple(t.median_s for t in timings),
            tuple(t.quantile_s(0.1) for t in timings),
            tuple(t.quantile_s(0.9) for t in timings),
            len(timings[0].samples_s),
            verified,
            tuple(t.samples_s for t in timings),
        )
        self.curves.append(curve)
        last = x[-1] if sweep == "size" else size_bytes
        rate, unit = last / curve.median_s[-1], "GB/s"
        if mechanism == "nccl":  # print the link rate (nccl-tests' busbw), not algorithm bandwidth
            rate, unit = (
                rate * bus_bandwidth_factor(Collective(name.split()[-1]), self.world),
                "GB/s busbw",
            )
        self.log(f"{name}: {len(x)} points, {rate / 1e9:.0f} {unit} at the last")
        return curve

    def _time(self, fn: Callable[[int], None], *, group: dist.ProcessGroup | None = None, calls: int = 1) -> Timing:
        barrier = None
        if group is not None:
            token = torch.zeros(1, device=self.device)

            def barrier() -> None:
                dist.all_reduce(token, group=group)

        return time_device(
            fn, iters=self.plan.samples, warmup=self.plan.warmup, calls_per_sample=calls, barrier=barrier, group=group
        )

    # ---- pairwise transfers (ranks 0 and 1) ----

    def _one_way(self, name: str, mechanism: str, direction: str, copy: Callable, ctas: int) -> None:
        """Rank 0 pulls from or pushes to rank 1: a size sweep, then (SM mechanisms) a CTA sweep."""
        pull = direction == "pull"
        src, dst = (self.peer_src, self.dst) if pull else (self.src, self.peer_dst)
        timings, ok = [], True
        for size in self.plan.sizes:
            n = size // 4
            self._poison(dst)
            timings.append(self._time(lambda i, n=n: copy(src[:n], dst[:n], ctas), calls=calls_per_sample(size)))
            torch.cuda.synchronize()
            ok &= self._check(dst, n, 1 if pull else 0)
        self._curve(
            f"{name} {direction}",
            mechanism,
            direction,
            "size",
            list(self.plan.sizes),
            timings,
            num_ctas=ctas,
            verified=ok,
        )
        if mechanism == "copy-engine":
            return
        n = self.plan.cta_sweep_bytes // 4
        self._poison(dst)
        counts = [c for c in self.plan.ctas if c < self.sm_count] + [self.sm_count]
        timings = [self._time(lambda i, c=c: copy(src[:n], dst[:n], c)) for c in counts]
        torch.cuda.synchronize()
        ok = self._check(dst, n, 1 if pull else 0)
        self._curve(
            f"{name} {direction} by CTAs",
            mechanism,
            direction,
            "ctas",
            counts,
            timings,
            size_bytes=self.plan.cta_sweep_bytes,
            verified=ok,
        )

    def _bidirectional(self, name: str, mechanism: str, copy: Callable, ctas: int, *, push: bool = False) -> None:
        """Both ranks pull from (or push to) each other at once; the slower rank's time counts."""
        src, dst = (self.src, self.peer_dst) if push else (self.peer_src, self.dst)
        timings, ok = [], True
        for size in self.plan.sizes:
            n = size // 4
            self._poison(self.dst)  # each rank poisons what it will receive, then both start together
            torch.cuda.synchronize()
            dist.barrier(group=self.pair)
            fn = lambda i, n=n: copy(src[:n], dst[:n], ctas)  # noqa: E731
            timings.append(self._time(fn, group=self.pair, calls=calls_per_sample(size)))
            torch.cuda.synchronize()
            dist.barrier(group=self.pair)
            ok &= self._check(self.dst, n, self.peer)
        flags = torch.tensor([int(ok)], device=self.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MIN, group=self.pair)
        if self.rank == 0:
            self._curve(
                f"{name} bidirectional",
                mechanism,
                "bidirectional",
                "size",
                list(self.plan.sizes),
                timings,
                num_ctas=ctas,
                verified=bool(flags.item()),
            )

    def _latency(self) -> None:
        flags = self.buf[-1:]  # reuse the guard word of each rank as its flag
        peer_flag = self.peer_dst[-1:]
        flags.zero_()
        torch.cuda.synchronize()
        dist.barrier(group=self.pair)
        out = torch.zeros(2, dtype=torch.int64, device=self.device)
        iters, per_launch = self.plan.pingpong_iters, []
        for k in range(self.plan.samples):
            pingpong(flags, peer_flag, out, k * (iters + 1) + 1, iters, self.rank == 0)
            torch.cuda.synchronize()
            if int(out[0]) != 1:
                self.notes.append("flag ping-pong gave up (poll cap reached)")
                return
            per_launch.append(int(out[1]) * 1e-9 / (2 * iters))
        flags.fill_(-1)
        per_launch.sort()
        if self.rank == 0:
            self.ceilings["flag_one_way_s"] = per_launch[len(per_launch) // 2]
            self.log(f"flag one-way latency {self.ceilings['flag_one_way_s'] * 1e6:.2f} µs")

    def pairwise(self) -> None:
        if self.peer is None:
            return
        sm = self.sm_count
        tma_ok = torch.ones(1, device=self.device)
        if self.rank == 0:
            self._one_way("copy-engine", "copy-engine", "pull", lambda s, d, c: d.copy_(s), 0)
            self._one_way("copy-engine", "copy-engine", "push", lambda s, d, c: d.copy_(s), 0)
            self._one_way("sm-load", "sm-load", "pull", sm_copy, sm)
            self._one_way("sm-store", "sm-store", "push", sm_copy, sm)
            for direction in ("pull", "push"):
                try:
                    self._one_way("tma", "tma", direction, tma_copy, sm)
                except Exception as e:  # TMA on peer memory is new: record, never fake
                    tma_ok.zero_()
                    self.notes.append(f"tma {direction} failed: {type(e).__name__}: {str(e).splitlines()[0]}")
            tma_ok *= all(c.verified for c in self.curves if c.mechanism == "tma")
        dist.all_reduce(tma_ok, op=dist.ReduceOp.MIN, group=self.pair)  # both ranks learn whether TMA works
        if self.plan.bidirectional:
            self._bidirectional("copy-engine", "copy-engine", lambda s, d, c: d.copy_(s), 0)
            self._bidirectional("sm-load", "sm-load", sm_copy, sm)
            self._bidirectional("sm-store", "sm-store", sm_copy, sm, push=True)
            if tma_ok.item():
                self._bidirectional("tma", "tma", tma_copy, sm)
        self._latency()

    def pair_matrix(self) -> None:
        """Every pair of GPUs in a node, in rounds of disjoint pairs (see pair_rounds); both pull at once."""
        if self.node_group is None:
            return
        local, n = self.rank % self.local_world, self.plan.cta_sweep_bytes // 4
        rates = torch.zeros(self.world, dtype=torch.float64, device=self.device)
        ok = True
        for round_pairs in pair_rounds(self.local_world):
            dist.barrier(group=self.node_group)
            partner = next((b if a == local else a for a, b in round_pairs if local in (a, b)), None)
            if partner is None:
                continue
            peer_src, _ = self._peer_regions(partner)
            self._poison(self.dst)
            timing = self._time(lambda i, src=peer_src: self.dst[:n].copy_(src[:n]))
            torch.cuda.synchronize()
            ok &= self._check(self.dst, n, self.rank - local + partner)
            rates[self.rank - local + partner] = 4 * n / timing.median_s
        table = [torch.zeros_like(rates) for _ in range(self.world)]
        dist.all_gather(table, rates)
        if self.rank == 0:
            for dst, row in enumerate(table):
                for src, rate in enumerate(row.tolist()):
                    if rate:
                        self.pairs[f"{dst}<-{src}"] = rate
            if not ok:
                self.notes.append("pair matrix: some pulled bytes did not verify")
            self.log(f"pairs (copy-engine pull, both ways at once): {len(self.pairs)} measured")

    def inter_node(self) -> None:
        """Send/recv from rank 0 to the first rank of node 1, through whatever transport NCCL picks."""
        if self.inter is None:
            return
        dst, timings, ok = self.local_world, [], True
        for size in self.plan.sizes:
            x = torch.full((size // 2,), 1.0, dtype=torch.bfloat16, device=self.device)
            y = torch.zeros_like(x)

            def op(i: int, x: torch.Tensor = x, y: torch.Tensor = y) -> None:
                if self.rank == 0:
                    dist.send(x, dst, group=self.inter)
                elif self.rank == dst:
                    dist.recv(y, 0, group=self.inter)

            if self.rank in (0, dst):
                op(0)
                torch.cuda.synchronize()
                ok &= self.rank == 0 or bool((y == 1).all())
                timings.append(self._timed_collective(op, calls_per_sample(size), group=self.inter))
        flags = torch.tensor([int(ok)], device=self.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        if self.rank == 0:
            self._curve(
                "network send-recv", "network", "", "size", list(self.plan.sizes), timings, verified=bool(flags.item())
            )

    # ---- collectives (every rank) ----

    def _collective_op(self, kind: str, elems: int) -> tuple[Callable[[int], None], torch.Tensor, float | None]:
        """(op, its output, the value every output element must hold or None for 'chunk j holds j + 1')."""
        n, dev = self.world, self.device
        x = torch.full((elems,), self.rank + 1.0, dtype=torch.bfloat16, device=dev)
        total = float(n * (n + 1) // 2)
        if kind == "all-reduce":
            return (lambda i: dist.all_reduce(x)), x, total
        if kind == "all-gather":
            y = torch.empty(elems, dtype=torch.bfloat16, device=dev)
            shard = x[: elems // n]
            return (lambda i: dist.all_gather_into_tensor(y, shard)), y, None
        if kind == "reduce-scatter":
            y = torch.empty(elems // n, dtype=torch.bfloat16, device=dev)
            return (lambda i: dist.reduce_scatter_tensor(y, x)), y, total
        if kind == "all-to-all":
            y = torch.empty_like(x)
            return (lambda i: dist.all_to_all_single(y, x)), y, None
        assert kind == "send-recv", kind
        y = torch.ones_like(x)  # rank 1 receives rank 0's ones; the other ranks keep theirs

        def sendrecv(i: int) -> None:
            if self.rank == 0:
                dist.send(x, 1)
            elif self.rank == 1:
                dist.recv(y, 0)

        return sendrecv, y, 1.0

    def _collective(self, kind: str) -> None:
        n, timings, ok = self.world, [], True
        for size in self.plan.sizes:
            elems = size // 2  # bf16
            op, y, want = self._collective_op(kind, elems)
            op(0)
            torch.cuda.synchronize()
            if want is not None:
                ok &= bool((y.float() == want).all())
            else:
                expected = torch.arange(1, n + 1, device=self.device).repeat_interleave(elems // n)
                ok &= bool(torch.equal(y.float(), expected.float()))
            timings.append(self._timed_collective(op, calls_per_sample(size)))
        flags = torch.tensor([int(ok)], device=self.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        if self.rank == 0:
            sizes = list(self.plan.sizes)
            self._curve(f"nccl {kind}", "nccl", "", "size", sizes, timings, verified=bool(flags.item()))

    def _timed_collective(
        self, op: Callable[[int], None], calls: int, group: dist.ProcessGroup | None = None
    ) -> Timing:
        group = group or dist.group.WORLD
        try:
            return self._time(op, group=group, calls=calls)
        except Exception as e:  # some collectives cannot be captured in a graph on some versions: time eagerly
            self.notes.append(f"graph capture failed ({type(e).__name__}); timed eagerly")
            torch.cuda.synchronize()
            token = torch.zeros(1, device=self.device)
            return time_device(
                op,
                iters=self.plan.samples,
                warmup=self.plan.warmup,
                calls_per_sample=calls,
                graph=False,
                barrier=lambda: dist.all_reduce(token, group=group),
                group=group,
            )

    def collectives(self) -> None:
        if self.world == 1:  # one GPU: no collective to time
            return
        for kind in self.plan.collectives:
            self._collective(kind)
        # host overhead of an eager small collective against the same under a CUDA graph
        x = torch.ones(1024, dtype=torch.float32, device=self.device)
        token = torch.zeros(1, device=self.device)
        eager = time_device(
            lambda i: dist.all_reduce(x),
            iters=self.plan.samples,
            calls_per_sample=20,
            graph=False,
            barrier=lambda: dist.all_reduce(token),
            group=dist.group.WORLD,
        )
        graph = self._time(lambda i: dist.all_reduce(x), group=dist.group.WORLD, calls=20)
        if self.rank == 0:
            self.ceilings["nccl_all_reduce_4KiB_eager_s"] = eager.median_s
            self.ceilings["nccl_all_reduce_4KiB_graph_s"] = graph.median_s
            self.log(f"NCCL 4 KiB all-reduce: eager {eager.median_s * 1e6:.1f} µs, graph {graph.median_s * 1e6:.1f} µs")

    # ---- local ceilings (rank 0's GPU) ----

    def ceilings_local(self) -> None:
        if self.rank != 0:
            return
        # HBM: a plain device-to-device copy of the plan's largest size, counting bytes read and written
        n = max(self.plan.sizes) // 4
        a = torch.empty(n, dtype=torch.int32, device=self.device)
        b = torch.empty_like(a)
        memcpy = self._time(lambda i: b.copy_(a))  # cudaMemcpyAsync: may run on a copy engine
        kernel = self._time(lambda i: torch.mul(a, 1, out=b))  # an elementwise kernel on every SM
        self.ceilings["hbm_memcpy_Bps"] = 2 * 4 * n / memcpy.median_s
        self.ceilings["hbm_kernel_copy_Bps"] = 2 * 4 * n / kernel.median_s
        self.ceilings["hbm_copy_Bps"] = max(self.ceilings["hbm_memcpy_Bps"], self.ceilings["hbm_kernel_copy_Bps"])
        m = self.plan.matmul_n
        watch = watches(self.device)  # the SM clock and power each rate was measured at (NVML, read-only)
        bursts = {}  # every dtype's burst first, each on a GPU that has not been held at its power limit
        for dtype in self.plan.matmul_dtypes:
            try:
                fn = self._matmul(dtype, m)
                with watch(dtype):
                    bursts[dtype] = (fn, self._time(fn).median_s)
                self.ceilings[f"matmul_{dtype}_flops"] = 2 * m**3 / bursts[dtype][1]
                self._clock(f"matmul_{dtype}", watch.summary(dtype))
            except Exception as e:
                self.notes.append(f"matmul {dtype} not measured: {type(e).__name__}: {str(e).splitlines()[0]}")
        for dtype, (fn, burst_s) in bursts.items():
            with watch(f"{dtype} sustained"):
                sustained_s = sustained_time(fn, burst_s, self.plan.sustain_s, self.plan.samples)
            self.ceilings[f"matmul_{dtype}_sustained_flops"] = 2 * m**3 / sustained_s
            self._clock(f"matmul_{dtype}_sustained", watch.summary(f"{dtype} sustained"))
        self.log("ceilings: " + ", ".join(f"{k} {v:.3g}" for k, v in self.ceilings.items()))

    def host_link(self) -> None:
        """Rank 0's GPU and its host: a pinned host buffer copied to the GPU and back (cudaMemcpyAsync, a copy
        engine), one way at a time, bytes checked; B/s of the plan's CTA-sweep size (64 MiB quick, 256 MiB)."""
        if self.rank != 0:
            return
        n = self.plan.cta_sweep_bytes // 4
        host = torch.empty(n, dtype=torch.int32, pin_memory=True)
        host.copy_(_pattern(n, 0, torch.device("cpu")))
        dev = torch.empty(n, dtype=torch.int32, device=self.device)
        timed = dict(iters=self.plan.samples, warmup=self.plan.warmup, graph=False)  # eager: copies of ms each
        to_gpu = time_device(lambda i: dev.copy_(host, non_blocking=True), **timed)
        torch.cuda.synchronize()
        ok = bool(torch.equal(dev, _pattern(n, 0, self.device)))
        back = torch.empty_like(host)
        to_host = time_device(lambda i: back.copy_(dev, non_blocking=True), **timed)
        torch.cuda.synchronize()
        ok &= bool(torch.equal(back, host))
        if not ok:
            self.notes.append("host link: the copied bytes did not verify; not recorded")
            return
        self.ceilings["host_to_device_Bps"] = 4 * n / to_gpu.median_s
        self.ceilings["device_to_host_Bps"] = 4 * n / to_host.median_s
        self.log(
            f"host link: to the GPU {self.ceilings['host_to_device_Bps'] / 1e9:.1f} GB/s, back "
            f"{self.ceilings['device_to_host_Bps'] / 1e9:.1f} GB/s"
        )

    def _clock(self, prefix: str, state: dict | None) -> None:
        """PREFIX_sm_clock_mhz and PREFIX_power_capped from a watch's summary, where NVML answered them."""
        for key in ("sm_clock_mhz", "power_capped"):
            if state and key in state:
                self.ceilings[f"{prefix}_{key}"] = float(state[key])

    def _matmul(self, dtype: str, m: int) -> Callable[[int], None]:
        g = torch.Generator(device=self.device).manual_seed(0)
        if dtype == "fp8":
            a = torch.randn(m, m, device=self.device, generator=g).to(torch.float8_e4m3fn)
            b = torch.randn(m, m, device=self.device, generator=g).to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=self.device)
            fn = lambda i: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
        else:
            t = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}[dtype]
            a = torch.randn(m, m, device=self.device, dtype=t, generator=g)
            b = torch.randn(m, m, device=self.device, dtype=t, generator=g)
            tf32 = dtype == "tf32"

            def fn(i: int) -> torch.Tensor:
                # set on every call: the sustained pass runs each dtype's fn again after all the bursts, when the
                # flag holds whatever the last dtype set (fp32 would run as tf32, or tf32 as fp32)
                torch.backends.cuda.matmul.allow_tf32 = tf32
                return torch.matmul(a, b)

        return fn


def sustained_time(fn: Callable[[int], None], burst_s: float, sustain_s: float, samples: int) -> float:
    """fn's time per call with the GPU kept busy: sustain_s of back-to-back calls first, then samples of at least
    SUSTAINED_SAMPLE_S of back-to-back calls each. A GPU under continuous matmuls settles at its power limit: on
    2xH200 the 8192³ bf16 matmul took 1.42 ms one call after idle, 1.61 ms with 10 calls per sample and 1.65 ms
    with 30 (700 W, SM clock ~1450 MHz against 1980; benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md)."""
    for i in range(max(1, round(sustain_s / burst_s))):
        fn(i)
    calls = max(1, round(SUSTAINED_SAMPLE_S / burst_s))
    return time_device(fn, iters=samples, warmup=1, calls_per_sample=calls).median_s


def _versions() -> dict[str, str]:
    import platform

    import triton

    nccl = ".".join(map(str, torch.cuda.nccl.version()))
    return {
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "nccl": nccl,
        "triton": triton.__version__,
        "python": platform.python_version(),
    }


def run(
    rank: int, world: int, port: int, plan: Plan, results_path: str, gpus: list[int], exit_process: bool = True
) -> None:
    """Entry point of one rank; rank 0 writes the results as JSON to `results_path`.

    port > 0: a rank the probe spawned on this node (rendezvous through a file beside results_path, GPU gpus[rank]).
    port == 0: a rank started by torchrun or srun (env:// rendezvous, GPU LOCAL_RANK, LOCAL_WORLD_SIZE per node).
    """
    keep_multicast_off(allowed=os.environ.get(ALLOW_MULTICAST) == "1")  # set by the probe for --allow-multicast
    launched = port == 0
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world)) if launched else world
    device = int(os.environ.get("LOCAL_RANK", 0)) if launched else gpus[rank]
    torch.cuda.set_device(device)
    # spawned on one node: a FileStore beside the results (no listening socket; torch's TCPStore binds every
    # interface whatever address it is given), one per start (`port` numbers the start)
    init = "env://" if launched else f"file://{results_path}.store-{port}"
    try:
        dist.init_process_group(
            "nccl", init_method=init, rank=rank, world_size=world, device_id=torch.device("cuda", device)
        )
    except RuntimeError as e:  # DistNetworkError: the port picked for us was taken before rank 0 listened on it
        if launched or "EADDRINUSE" not in str(e):
            raise
        print(f"rank {rank}: rendezvous port {port} was taken; the probe starts again on another", file=sys.stderr)
        os._exit(PORT_TAKEN_EXIT)
    start = time.perf_counter()

    def log(message: str) -> None:
        if rank == 0:
            print(f"[probe {time.perf_counter() - start:5.1f}s] {message}", flush=True)

    r = Rank(rank, world, local_world, plan, log)
    for step in (r.ceilings_local, r.host_link, r.pairwise, r.pair_matrix, r.inter_node, r.collectives):
        step()
        dist.barrier()
    torch.cuda.synchronize()
    if rank == 0:
        record = {
            "host": socket.gethostname(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "versions": _versions(),
            "gpu_name": torch.cuda.get_device_name(r.device),
            "sm_count": r.sm_count,
            "hbm_capacity_bytes": torch.cuda.get_device_properties(r.device).total_memory,
            "capability": list(torch.cuda.get_device_capability(r.device)),
            "world": world,
            "local_world": local_world,
            "measure_s": time.perf_counter() - start,
            "curves": [dataclasses.asdict(c) for c in r.curves],
            "ceilings": r.ceilings,
            "pairs": r.pairs,
            "notes": r.notes,
        }
        with open(results_path, "w") as f:
            json.dump(record, f)
    dist.barrier()
    if exit_process:
        os._exit(0)  # skip process-group teardown, which can hang after symmetric memory (seen on the 2xH200 node)
