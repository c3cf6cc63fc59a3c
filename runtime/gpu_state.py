"""What a rank's GPU was doing while its timed samples ran: SM clock, power, and why the clock was held down.

A matmul's rate follows the SM clock, and the clock follows power: on 2xH200 an 8192³ bf16 matmul ran at 772
TFLOP/s for one call after idle and 667 back to back, the SM clock 1980 against 1450 MHz, the GPU at its 700 W
limit (benchmarks/kernels/2026-11-30-gemm-rates-h200x2.md §1). A record that keeps the clock its samples ran at says
which of the two a time belongs to.

    watch = watches(device)              # this torch device's GPU, found in NVML by UUID (a no-op if not found)
    with watch("graph"):                 # a thread reads the SM clock and the clock-event reasons every PERIOD_S
        ...                              # the timed samples
    watch.summary("graph")               # {"sm_clock_mhz": 1455, "power_capped": 0.93, ...}

Counters read at both ends: energy (average power) and the time NVML counts as held by the power policy
(`power_capped`, its share of the window). Everything is read through runtime/nvml.py, read-only; a value NVML
does not answer is left out of the summary, never guessed.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from contextlib import AbstractContextManager
from typing import Any

from pkroof.runtime.nvml import NA, Device

PERIOD_S = 0.002
SM_CLOCK = 1  # NVML_CLOCK_SM
POWER_POLICY = 0  # NVML_PERF_POLICY_POWER
REASONS = {  # nvmlClocksEventReason* bits
    0x1: "idle",
    0x2: "applications clocks",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
    0x100: "display clocks",
}


def nvml_index(nvml: Any, uuid: str) -> int | None:
    """The NVML index of the GPU whose UUID is `uuid` ("GPU-…", as NVML writes it); None if no GPU has it."""
    count = nvml.query("nvmlDeviceGetCount")
    if isinstance(count, NA):
        return None
    for i in range(count):
        if nvml.query("nvmlDeviceGetUUID", Device(i)) == uuid:
            return i
    return None


def reasons(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


class Watch:
    """Samples one GPU's SM clock on a thread while the block runs; reads energy and power-policy time at both ends."""

    def __init__(self, nvml: Any, index: int, period_s: float = PERIOD_S, clock: Any = time.monotonic) -> None:
        self.nvml, self.device, self.period_s, self.clock = nvml, Device(index), period_s, clock
        self.clocks: list[int] = []
        self.mask = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start: dict[str, Any] = {}
        self._end: dict[str, Any] = {}

    def _counters(self) -> dict[str, Any]:
        q = self.nvml.query
        return {
            "t": self.clock(),
            "energy_mj": q("nvmlDeviceGetTotalEnergyConsumption", self.device),
            "violation": q("nvmlDeviceGetViolationStatus", self.device, POWER_POLICY),
        }

    def _sample(self) -> None:
        mhz = self.nvml.query("nvmlDeviceGetClockInfo", self.device, SM_CLOCK)
        if not isinstance(mhz, NA):
            self.clocks.append(int(mhz))
        mask = self.nvml.query("nvmlDeviceGetCurrentClocksEventReasons", self.device)
        if isinstance(mask, NA):  # the older name of the same call
            mask = self.nvml.query("nvmlDeviceGetCurrentClocksThrottleReasons", self.device)
        if not isinstance(mask, NA):
            self.mask |= int(mask) & ~0x1  # "idle" is the gaps between samples, not the samples

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def __enter__(self) -> Watch:
        self._start = self._counters()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="pkroof-gpu-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        self._end = self._counters()

    def summary(self) -> dict[str, Any]:
        """The window's state: SM clock (median and lowest sample, MHz) against the GPU's maximum, average power
        against the enforced limit, the share of the window the power policy held the clock, the reasons seen."""
        q = self.nvml.query
        window = self._end["t"] - self._start["t"]
        out: dict[str, Any] = {"nvml_index": self.device.index, "window_s": window, "clock_samples": len(self.clocks)}
        if self.clocks:
            out |= {"sm_clock_mhz": statistics.median(self.clocks), "sm_clock_min_mhz": min(self.clocks)}
        top = q("nvmlDeviceGetMaxClockInfo", self.device, SM_CLOCK)
        if not isinstance(top, NA):
            out["sm_clock_max_mhz"] = int(top)
        e0, e1 = self._start["energy_mj"], self._end["energy_mj"]
        if window > 0 and not isinstance(e0, NA) and not isinstance(e1, NA):
            out["power_w"] = (e1 - e0) * 1e-3 / window
        limit = q("nvmlDeviceGetEnforcedPowerLimit", self.device)
        if not isinstance(limit, NA):
            out["power_limit_w"] = limit * 1e-3
        v0, v1 = self._start["violation"], self._end["violation"]
        if window > 0 and isinstance(v0, dict) and isinstance(v1, dict):  # violationTime counts nanoseconds
            out["power_capped"] = min(1.0, max(0.0, (v1["violationTime"] - v0["violationTime"]) * 1e-9 / window))
        out["reasons"] = reasons(self.mask)
        return out


class Watches:
    """One Watch per named phase on one GPU; a no-op where NVML cannot name the GPU (index None)."""

    def __init__(self, nvml: Any, index: int | None) -> None:
        self.nvml, self.index = nvml, index
        self.done: dict[str, Watch] = {}

    def __call__(self, name: str) -> AbstractContextManager:
        if self.index is None:
            return contextlib.nullcontext()
        self.done[name] = Watch(self.nvml, self.index)
        return self.done[name]

    def summary(self, name: str) -> dict[str, Any] | None:
        return self.done[name].summary() if name in self.done else None


def watches(device: Any) -> Watches:
    """Watches on torch device `device`, found in NVML by its UUID (CUDA and NVML may number GPUs differently);
    PKROOF_GPU_STATE=0 turns them off (no thread, no NVML)."""
    if os.environ.get("PKROOF_GPU_STATE", "1") == "0":
        return Watches(None, None)
    import torch

    from pkroof.runtime.nvml import Nvml

    nvml = Nvml()
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    return Watches(nvml, nvml_index(nvml, f"GPU-{uuid}") if uuid is not None else None)


def slowest(states: list[dict[str, Any]]) -> dict[str, float]:
    """The record's summary over ranks: the lowest median SM clock, the highest power-capped share."""
    clocks = [s["sm_clock_mhz"] for s in states if "sm_clock_mhz" in s]
    capped = [s["power_capped"] for s in states if "power_capped" in s]
    out: dict[str, float] = {}
    if clocks:
        out["sm_clock_mhz"] = min(clocks)
    if capped:
        out["power_capped"] = max(capped)
    return out
