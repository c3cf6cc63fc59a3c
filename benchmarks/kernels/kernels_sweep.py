"""Sweep pkroof's collective kernel over CTA counts (and block sizes) on every GPU of a node.

    python3 benchmarks/kernels/kernels_sweep.py [SIZE ...] [--blocks 4096,8192,16384] [--modes pull,push,split,tma]
                                         [--ctas 16,32,64,128,256]   (default: 64MiB 256KiB, 4096, pull,push)
    python3 benchmarks/kernels/kernels_sweep.py [SIZE ...] --ce-chunks 0,8,16   CE chunk MiB (0: halve)
                                         [--ce-local dma,sm,sm16,none]  copy-out (smN: N CTAs; none: no local work)
                                         [--ce-calls 1,3]  calls per sample (the profiler: 3 at these sizes)
                                         [--ce-streams 1,2]  copy streams the chunks alternate over

One process per GPU; each configuration is timed by pkroof's own timing function (CUDA graphs, 20 samples,
slowest rank) on one fixed input; correctness is the profiler's job, not this script's. The block size is
the largest BLOCK the kernel may pick (PKROOF_MAX_BLOCK, and PKROOF_TMA_MAX_BLOCK for tma). With
--ce-chunks it times the copy-engine collectives (kernels/copy_engine.py) instead, once per chunk size.
"""

import argparse
import itertools
import os

from pkroof.runtime.launch import keep_multicast_off

keep_multicast_off()  # before torch: its ranks use symmetric memory and NCCL, never with NVLink multicast

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

KINDS = {"all-reduce": 0, "all-gather": 1, "reduce-scatter": 2, "all-to-all": 3}
CTAS = [16, 32, 64, 128, 256]


def _ce_rows(
    world: int,
    sizes: list[str],
    chunks_mib: list[int],
    locals_: list[str],
    calls_list: list[int],
    streams_list: list[int],
    show,
) -> list[tuple]:
    import pkroof.kernels.copy_engine as ce
    from pkroof.rooflines.units import parse_size
    from pkroof.runtime.timing import time_device

    fns = {"all-reduce": ce.all_reduce_ce, "all-gather": ce.all_gather_ce, "reduce-scatter": ce.reduce_scatter_ce}
    fns["all-to-all"] = ce.all_to_all_ce
    rows, plain, plain_copy = [], ce._pipelined, ce._copy_local
    for size in sizes:
        nbytes = parse_size(size)
        for name, fn in fns.items():
            numel = nbytes // 2 // (world if name == "all-gather" else 1)
            x = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
            for local in locals_:
                # "none": the DMAs and flags alone, no local add or copy-out (a diagnostic: the result is not the
                # collective's) to tell the link pipeline's cost from the local work's
                # "smN": the gathers' copy-out on N CTAs (_throttled_copy)
                ce._pipelined = plain if local != "none" else _no_local_work(plain)
                os.environ["PKROOF_CE_LOCAL_COPY"] = local if local in ("sm", "dma") else "sm"  # read per call
                ce._copy_local = _throttled_copy(int(local[2:]), plain_copy) if local[2:].isdigit() else plain_copy
                for mib, calls, streams in itertools.product(chunks_mib, calls_list, streams_list):  # 0 MiB: halving
                    os.environ["PKROOF_CE_SCHEDULE"] = "halving" if mib == 0 else "equal"
                    os.environ["PKROOF_CE_CHUNK"] = str(max(1, mib << 20))
                    os.environ["PKROOF_CE_STREAMS"] = str(streams)
                    t = time_device(
                        lambda i, f=fn, x=x: f(x),
                        iters=20,
                        calls_per_sample=calls,
                        barrier=dist.barrier,
                        group=dist.group.WORLD,
                    )
                    mode = f"ce-{local}" + (f"x{calls}" if calls > 1 else "") + (f"s{streams}" if streams > 1 else "")
                    rows.append((size, name, mode, f"{mib}MiB" if mib else "halve", 0, t.median_s * 1e6))
                    show(rows[-1:])
    return rows


def _throttled_copy(ctas: int, plain):
    """The gathers' copy-out by the probe's copy kernel on `ctas` CTAs (spread over the DMAs' window rather than
    a full-grid burst), where both sides allow 4-byte words; torch.mul (the default) elsewhere."""
    from pkroof.topology.copy_kernels import sm_copy

    def copy(src, dst, how):
        words = src.numel() * src.element_size()
        if words % 4 or src.data_ptr() % 16 or dst.data_ptr() % 16:
            plain(src, dst, how)
        else:
            sm_copy(src.view(torch.int32), dst.view(torch.int32), ctas)

    return copy


def _no_local_work(pipelined):
    def run(name, sources, consume, meanwhile=None):
        pipelined(name, sources, lambda *args: None)

    return run


MODES = {"pull": {"push": False}, "push": {"push": True}, "split": {"push": True, "split": True}}
MODES["tma"] = {"push": True, "tma": True}


def _worker(
    rank: int,
    world: int,
    sizes: list[str],
    blocks: list[int],
    chunks_mib: list[int],
    modes: list[str],
    ctas_list: list[int],
    locals_: list[str],
    calls_list: list[int],
    streams_list: list[int],
) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    import pkroof.kernels.symm_collectives as coll
    from pkroof.rooflines.units import parse_size
    from pkroof.runtime.timing import time_device

    if rank == 0:  # rows print as they are measured: a sweep cut short by a timeout keeps what it had
        print(f"{'size':>7} {'collective':15} {'mode':8} {'block':>6} {'ctas':>5} {'median us':>10}", flush=True)
    show = _print if rank == 0 else _silent
    if chunks_mib:
        _ce_rows(world, sizes, chunks_mib, locals_, calls_list, streams_list, show)
        dist.destroy_process_group()
        return
    rows = []
    for size in sizes:
        nbytes = parse_size(size)
        for name, kind in KINDS.items():
            numel = nbytes // 2 // (world if name == "all-gather" else 1)  # nccl-tests: all-gather's size is the output
            x = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
            for mode in modes:
                for block in blocks:
                    os.environ["PKROOF_MAX_BLOCK"] = os.environ["PKROOF_TMA_MAX_BLOCK"] = str(block)  # read per launch
                    for ctas in ctas_list:
                        t = time_device(
                            lambda i, k=kind, x=x, m=MODES[mode], c=ctas: coll.exchange(k, x, ctas=c, **m),
                            iters=20,
                            barrier=dist.barrier,
                            group=dist.group.WORLD,
                        )
                        rows.append((size, name, mode, block, ctas, t.median_s * 1e6))
                        show(rows[-1:])
    dist.destroy_process_group()


def _print(rows: list[tuple]) -> None:
    for size, name, mode, block, ctas, us in rows:
        print(f"{size:>7} {name:15} {mode:8} {block:>6} {ctas:>5} {us:10.1f}", flush=True)


def _silent(rows: list[tuple]) -> None:
    pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", default=["64MiB", "256KiB"])
    parser.add_argument("--blocks", default="4096", help="comma-separated largest block sizes, in elements")
    parser.add_argument("--modes", default="pull,push", help="comma-separated: pull, push, split, tma")
    parser.add_argument("--ctas", default=",".join(map(str, CTAS)), help="CTA counts (split: both roles)")
    parser.add_argument("--ce-chunks", default="", help="comma-separated copy-engine chunk sizes in MiB (CE only)")
    parser.add_argument(
        "--ce-local", default="dma", help="CE only: copy-out by dma, sm, smN (N CTAs), none (no local work)"
    )
    parser.add_argument("--ce-calls", default="1", help="CE only: comma-separated back-to-back calls per sample")
    parser.add_argument("--ce-streams", default="1", help="CE only: comma-separated copy-stream counts")
    args = parser.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    world = torch.cuda.device_count()
    blocks = [int(b) for b in args.blocks.split(",")]
    chunks_mib = [int(c) for c in args.ce_chunks.split(",") if c]
    modes, ctas = args.modes.split(","), [int(c) for c in args.ctas.split(",")]
    locals_, calls = args.ce_local.split(","), [int(c) for c in args.ce_calls.split(",")]
    streams = [int(c) for c in args.ce_streams.split(",")]
    spawned = (world, args.sizes, blocks, chunks_mib, modes, ctas, locals_, calls, streams)
    mp.spawn(_worker, args=spawned, nprocs=world)
