"""What a reference sees in place of GPUs and a process group while it is traced: CUDA streams, events and device
queries that answer as one device would, tensors asked for on "cuda" made on the trace's device (CudaShims), and
torch's fake process group as one rank of many (FakeGroup). Nothing is patched outside the trace.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.distributed as dist

from .recorder import RECORDING


class _Stream:
    """A CUDA stream or event while a reference is traced: ordering on one device is not what a trace counts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.device = torch.device("meta")

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:  # wait_stream, record_event, synchronize, query, elapsed_time...
        return lambda *args, **kwargs: None if name not in ("query",) else True


def _cuda_like(device: Any) -> bool:
    """A device that names a GPU: "cuda", "cuda:1", torch.device("cuda"), or a bare index."""
    if isinstance(device, str):
        return device.startswith("cuda")
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


class _OnTraceDevice(torch.overrides.TorchFunctionMode):
    """Tensors a reference puts on "cuda" (a hard-coded device, `.cuda()`) land on the trace's device instead."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.tolist, torch.Tensor.numpy) and RECORDING:  # the host reads values: it waits
            RECORDING[-1].host_waits([args[0]])
        if func is torch.Tensor.cuda:
            return args[0].to(self.device)
        if _cuda_like(kwargs.get("device")):
            kwargs["device"] = self.device
        if func is torch.Tensor.to:
            args = tuple(self.device if _cuda_like(a) else a for a in args)
        return func(*args, **kwargs)


class CudaShims:
    """While a reference is traced on meta tensors or CPU ranks: CUDA streams, events and device queries answer as a
    single device would, and tensors asked for on "cuda" are made on the trace's device, so code written for GPUs
    traces where it would run. Nothing is patched outside the trace."""

    NAMES: ClassVar[dict[str, Any]] = {
        "Stream": _Stream,
        "Event": _Stream,
        "stream": _Stream,
        "current_stream": _Stream,
        "default_stream": _Stream,
        "synchronize": lambda *a, **k: None,
        "current_device": lambda: 0,
        "set_device": lambda *a, **k: None,
    }

    def __init__(self, device: torch.device) -> None:
        self.mode = _OnTraceDevice(device)
        self.saved: dict[str, Any] = {}

    def __enter__(self) -> CudaShims:
        for name, fake in self.NAMES.items():
            self.saved[name] = getattr(torch.cuda, name, None)
            setattr(torch.cuda, name, fake)
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.mode.__exit__(*exc)
        for name, real in self.saved.items():
            setattr(torch.cuda, name, real)


class FakeGroup:
    """torch's fake process group as `rank` of `world_size`, for one rank's trace on meta tensors."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size

    def __enter__(self) -> FakeGroup:
        from torch.testing._internal.distributed.fake_pg import FakeStore

        if dist.is_initialized():
            raise RuntimeError("a process group is already initialised in this process; trace over gloo instead")
        dist.init_process_group("fake", store=FakeStore(), rank=self.rank, world_size=self.world_size)
        # batch_isend_irecv asks the group for its tensors' device's backend: meta gets the fake one too
        group, cpu = dist.group.WORLD, torch.device("cpu")
        group._register_backend(torch.device("meta"), group.BackendType.CUSTOM, group._get_backend(cpu))
        return self

    def __exit__(self, *exc: object) -> None:
        dist.destroy_process_group()
