"""The one boundary around NVML: every NVML call in pkroof goes through `query` on one of these backends.

    nvml = Nvml()                                    # live: imports pynvml and calls nvmlInit on first use
    nvml.query("nvmlDeviceGetName", Device(0))       # -> "NVIDIA H200", or NA("nvmlDeviceGetName: Not Supported")
    nvml.query("nvmlDeviceGetGpuFabricInfoV", Device(0), Out("c_nvmlGpuFabricInfoV_t"))  # -> the struct as a dict

`query(name, *args)` calls `pynvml.<name>(*args)` and answers plain data: ints, floats, str, lists, and dicts
for ctypes structs and unions (bytes decoded to str). Anything that fails (pynvml not installed, no driver,
an NVMLError, a function this pynvml or this driver lacks) answers `NA` carrying the reason, and each distinct
failure is logged once. Arguments are plain data too: `Device(i)` stands for the handle of GPU i, and
`Out("<pynvml struct name>")` for a struct the function fills in (its answer is then that struct).

`Recorder` wraps a backend and keeps every call's answer in a JSON-able dict; `Replay` answers from such a
dict, so everything above this module runs and is tested without GPUs. Only read-only NVML functions are
meant to be queried here: nothing that sets clocks, power, or resets, and nothing that creates multicast objects.
"""

from __future__ import annotations

import copy
import ctypes
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

RECORDING_FORMAT = "pkroof-nvml-recording"
RECORDING_VERSION = 1


@dataclass(frozen=True)
class NA:
    """Not available: what a query answers instead of a value, with the reason. All NAs compare equal."""

    reason: str = field(default="", compare=False)

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"NA({self.reason!r})"


@dataclass(frozen=True)
class Device:
    """Argument standing for the NVML handle of GPU `index` (nvmlDeviceGetHandleByIndex)."""

    index: int


@dataclass(frozen=True)
class Out:
    """Argument standing for a pynvml struct (by class name) that the function fills in; it is the answer."""

    struct: str


def call_key(name: str, args: tuple) -> str:
    """The recording's key for one call, e.g. 'nvmlDeviceGetNvLinkState(gpu0, 3)'."""

    def arg(a: Any) -> str:
        if isinstance(a, Device):
            return f"gpu{a.index}"
        if isinstance(a, Out):
            return f"out:{a.struct}"
        return json.dumps(a)

    return f"{name}({', '.join(arg(a) for a in args)})"


def _plain(value: Any) -> Any:
    """ctypes structs and unions → dicts of their fields, arrays → lists, bytes → str, simple ctypes → value."""
    if isinstance(value, (ctypes.Structure, ctypes.Union)):
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, ctypes.Array):
        return [_plain(v) for v in value]
    if isinstance(value, ctypes._SimpleCData):
        return _plain(value.value)
    if isinstance(value, bytes):
        return value.split(b"\0", 1)[0].decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class _Backend:
    """What every backend shares: the NA answer, logged once per distinct (function, reason)."""

    def __init__(self) -> None:
        self._logged: set[tuple[str, str]] = set()

    def _na(self, name: str, reason: str, *, level: int = logging.INFO) -> NA:
        if (name, reason) not in self._logged:
            self._logged.add((name, reason))
            log.log(level, "NVML %s: %s (further occurrences not logged)", name, reason)
        return NA(f"{name}: {reason}")

    def query(self, name: str, *args: Any) -> Any:
        raise NotImplementedError


class Nvml(_Backend):
    """The live backend: pynvml on this machine's driver, initialised on the first query."""

    def __init__(self) -> None:
        super().__init__()
        self._pynvml: Any = None
        self._broken: str = ""  # why NVML cannot be used at all, once known
        self._handles: dict[int, Any] = {}

    def _library(self) -> Any:
        if self._pynvml is None and not self._broken:
            try:
                import pynvml  # the only import of pynvml in pkroof
            except ImportError as e:
                self._broken = f"pynvml is not installed ({e}); pip install nvidia-ml-py"
                return None
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as e:
                self._broken = f"nvmlInit failed: {e}"
                return None
            self._pynvml = pynvml
        return self._pynvml

    def _resolve(self, pynvml: Any, arg: Any) -> Any:
        if isinstance(arg, Device):
            if arg.index not in self._handles:
                self._handles[arg.index] = pynvml.nvmlDeviceGetHandleByIndex(arg.index)
            return self._handles[arg.index]
        if isinstance(arg, Out):
            return getattr(pynvml, arg.struct)()  # pynvml's versioned structs set their version in __init__
        return arg

    def query(self, name: str, *args: Any) -> Any:
        pynvml = self._library()
        if pynvml is None:
            return (
                NA(f"{name}: {self._broken}")
                if ("nvmlInit", self._broken) in self._logged
                else self._na("nvmlInit", self._broken)
            )
        function = getattr(pynvml, name, None)
        if function is None:
            return self._na(name, f"this pynvml ({getattr(pynvml, '__version__', '?')}) has no such function")
        try:
            resolved = [self._resolve(pynvml, a) for a in args]
            outs = [r for a, r in zip(args, resolved, strict=True) if isinstance(a, Out)]
            passed = [ctypes.byref(r) if isinstance(a, Out) else r for a, r in zip(args, resolved, strict=True)]
            value = function(*passed)
        except pynvml.NVMLError as e:
            return self._na(name, str(e))
        except (AttributeError, TypeError, ctypes.ArgumentError) as e:  # a struct or signature this pynvml lacks
            return self._na(name, f"this pynvml cannot make this call ({type(e).__name__}: {e})", level=logging.WARNING)
        return _plain(outs[0] if outs else value)

    def close(self) -> None:
        if self._pynvml is not None:
            self._pynvml.nvmlShutdown()
            self._pynvml = None
            self._handles.clear()

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Recorder(_Backend):
    """Passes every query to `inner` and records its answer: key → {"value": ...} or {"na": reason}."""

    def __init__(self, inner: _Backend) -> None:
        super().__init__()
        self.inner = inner
        self.calls: dict[str, dict[str, Any]] = {}

    def query(self, name: str, *args: Any) -> Any:
        value = self.inner.query(name, *args)
        key = call_key(name, args)
        self.calls[key] = {"na": value.reason} if isinstance(value, NA) else {"value": _plain(value)}
        return value

    def recording(self, **meta: Any) -> dict[str, Any]:
        """The JSON-able recording; `meta` (host, date, versions, ...) is stored beside the calls."""
        return {"format": RECORDING_FORMAT, "version": RECORDING_VERSION, "meta": meta, "calls": dict(self.calls)}


class Replay(_Backend):
    """Answers from a recording made by `Recorder`; a call that was not recorded answers NA."""

    def __init__(self, recording: dict[str, Any]) -> None:
        super().__init__()
        if recording and recording.get("format", RECORDING_FORMAT) != RECORDING_FORMAT:
            raise ValueError(f"format: expected {RECORDING_FORMAT!r}, got {recording.get('format')!r}")
        self.calls: dict[str, dict[str, Any]] = recording.get("calls", {})

    @classmethod
    def load(cls, path: str | Path) -> Replay:
        return cls(json.loads(Path(path).read_text()))

    def query(self, name: str, *args: Any) -> Any:
        answer = self.calls.get(call_key(name, args))
        if answer is None:
            return self._na(name, "not in the recording")
        if "na" in answer:
            return self._na(name, answer["na"].removeprefix(f"{name}: "))
        return copy.deepcopy(answer["value"])
