"""Worker functions for the probe's orchestration tests (module level, so spawned processes can import them)."""

import sys
import time
from pathlib import Path


def writes_file(rank: int, world: int, folder: str) -> None:
    Path(folder, f"rank{rank}").write_text(str(world))


def rank1_fails(rank: int, world: int, folder: str) -> None:
    if rank == 1:
        print("rank 1: simulated kernel failure", file=sys.stderr)
        raise SystemExit(3)
    time.sleep(600)  # rank 0 would wait for its peer forever; the parent must stop it
    Path(folder, "rank0-done").write_text("")


def hangs(rank: int, world: int, folder: str) -> None:
    Path(folder, f"pid{rank}").write_text(str(__import__("os").getpid()))
    time.sleep(120)


def gloo_all_reduce(rank: int, world: int, port: int, folder: str) -> None:
    """A real torch.distributed rendezvous through the probe's launcher: each rank adds rank + 1."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    Path(folder, f"rank{rank}").write_text(str(x.item()))
    dist.destroy_process_group()


def rank_and_sum(rank: int, world: int) -> tuple[int, float]:
    """Run inside run_ranks' process group: this rank and the all-reduced sum of rank + 1 (1 + 2 + ... + world)."""
    import torch
    import torch.distributed as dist

    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    return rank, x.item()


def port_taken_once(rank: int, world: int, port: int, folder: str) -> None:
    """Rank 0 of the first start finds its port taken (as the probe's rank does) and exits with PORT_TAKEN_EXIT;
    the next start works: every rank writes the port it got."""
    import os

    from pkroof.runtime.launch import PORT_TAKEN_EXIT

    marker = Path(folder, "taken")
    if rank == 0 and not marker.exists():
        marker.write_text(str(port))
        os._exit(PORT_TAKEN_EXIT)
    Path(folder, f"rank{rank}").write_text(str(port))


def port_always_taken(rank: int, world: int, port: int, folder: str) -> None:
    import os

    from pkroof.runtime.launch import PORT_TAKEN_EXIT

    if rank == 0:
        os._exit(PORT_TAKEN_EXIT)
    time.sleep(30)


def multicast_env(rank: int, world: int) -> dict[str, str | None]:
    """Run inside run_ranks: what this rank sees of the variables that keep NVLink multicast off."""
    import os

    return {
        k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
    }
