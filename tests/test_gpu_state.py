"""The GPU-state watch a record's timed samples run under: arithmetic on a scripted NVML, then a real GPU."""

import pytest

from pkroof.runtime.gpu_state import Watch, nvml_index, reasons, slowest
from pkroof.runtime.nvml import NA


class _ScriptedNvml:
    """Answers every read-only query the watch makes from fixed values; counters from a list, one per read."""

    def __init__(self, clocks, energy_mj, violation_ns, mask=0x4 | 0x1, uuids=("GPU-a", "GPU-b")):
        self.clocks, self.energy, self.violation = list(clocks), list(energy_mj), list(violation_ns)
        self.mask, self.uuids = mask, uuids

    def query(self, name, *args):
        if name == "nvmlDeviceGetClockInfo":
            return self.clocks.pop(0) if self.clocks else NA("no more")
        if name == "nvmlDeviceGetCurrentClocksEventReasons":
            return self.mask
        if name == "nvmlDeviceGetTotalEnergyConsumption":
            return self.energy.pop(0)
        if name == "nvmlDeviceGetViolationStatus":
            return {"referenceTime": 0, "violationTime": self.violation.pop(0)}
        if name == "nvmlDeviceGetMaxClockInfo":
            return 1980
        if name == "nvmlDeviceGetEnforcedPowerLimit":
            return 700_000  # mW
        if name == "nvmlDeviceGetCount":
            return len(self.uuids)
        if name == "nvmlDeviceGetUUID":
            return self.uuids[args[0].index]
        return NA(f"{name}: not scripted")


class _Clock:
    """time.monotonic stand-in: 10.0 at the start counters, 12.5 at the end ones."""

    def __init__(self):
        self.reads = [10.0, 12.5]

    def __call__(self):
        return self.reads.pop(0)


def test_the_summary_is_the_window_arithmetic():
    # The thread samples only every hour here, so the clock is read exactly twice: at entry and at exit.
    nvml = _ScriptedNvml(clocks=[1980, 1450], energy_mj=[1_000_000, 2_500_000], violation_ns=[5e9, 7e9])
    with Watch(nvml, 1, period_s=3600, clock=_Clock()) as watch:
        pass
    s = watch.summary()
    assert s["nvml_index"] == 1 and s["window_s"] == pytest.approx(2.5) and s["clock_samples"] == 2
    assert s["sm_clock_mhz"] == (1980 + 1450) / 2 and s["sm_clock_min_mhz"] == 1450 and s["sm_clock_max_mhz"] == 1980
    # 1 500 000 mJ = 1500 J over 2.5 s = 600 W; the limit 700 000 mW = 700 W
    assert s["power_w"] == pytest.approx(600.0) and s["power_limit_w"] == pytest.approx(700.0)
    # the power policy held the clock 2e9 ns = 2 s of the 2.5 s window
    assert s["power_capped"] == pytest.approx(0.8)
    assert s["reasons"] == ["software power cap"]  # "idle" (0x1) is the gaps between samples, left out


def test_a_value_nvml_does_not_answer_is_left_out_never_guessed():
    class _Mute(_ScriptedNvml):
        def query(self, name, *args):
            if name in ("nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetViolationStatus"):
                return NA(f"{name}: Not Supported")
            return super().query(name, *args)

    with Watch(_Mute(clocks=[], energy_mj=[], violation_ns=[]), 0, period_s=3600, clock=_Clock()) as watch:
        pass
    s = watch.summary()
    assert not {"power_w", "power_capped", "sm_clock_mhz"} & s.keys() and s["clock_samples"] == 0


def test_the_sampling_thread_reads_the_clock_while_the_block_runs():
    import time

    nvml = _ScriptedNvml(clocks=[1500] * 10_000, energy_mj=[0, 1], violation_ns=[0, 0])
    with Watch(nvml, 0, period_s=0.001) as watch:
        time.sleep(0.05)
    # 50 ms at one read per ms, plus one at each end: far more than the 2 reads without the thread
    assert watch.summary()["clock_samples"] > 5


def test_counter_arithmetic_is_clamped_to_the_window():
    # a violation counter that jumped by more than the window (NVML counts in its own steps) reads as 100%
    nvml = _ScriptedNvml(clocks=[1980, 1980], energy_mj=[0, 0], violation_ns=[0, 9e9])
    with Watch(nvml, 0, period_s=3600, clock=_Clock()) as watch:
        pass
    assert watch.summary()["power_capped"] == 1.0


def test_the_gpu_is_found_by_its_uuid_and_the_record_keeps_the_slowest_rank():
    nvml = _ScriptedNvml([], [], [], uuids=("GPU-x", "GPU-y", "GPU-z"))
    assert nvml_index(nvml, "GPU-z") == 2 and nvml_index(nvml, "GPU-none") is None
    assert reasons(0x4 | 0x40) == ["software power cap", "hardware thermal slowdown"]
    states = [{"sm_clock_mhz": 1980, "power_capped": 0.0}, {"sm_clock_mhz": 1455, "power_capped": 0.9}, {}]
    assert slowest(states) == {"sm_clock_mhz": 1455, "power_capped": 0.9}
    assert slowest([]) == {}


def test_watches_on_a_gpu_nvml_cannot_name_do_nothing():
    from pkroof.runtime.gpu_state import Watches

    watch = Watches(_ScriptedNvml([], [], []), None)
    with watch("graph"):
        pass
    assert watch.summary("graph") is None and watch.summary("never ran") is None


def test_pkroof_gpu_state_0_turns_the_watch_off(monkeypatch):
    from pkroof.runtime.gpu_state import watches

    monkeypatch.setenv("PKROOF_GPU_STATE", "0")
    watch = watches("cuda:0")  # no NVML, no torch device query: the switch is read first
    with watch("graph"):
        pass
    assert watch.index is None and watch.summary("graph") is None


def test_finish_puts_the_slowest_ranks_clock_on_the_record():
    from pkroof.profilers.run import finish

    timing = {"mode": "graph", "samples_s": [1e-3] * 5, "calls_per_sample": 3}
    timing["gpu_state"] = [{"rank": 0, "sm_clock_mhz": 1800, "power_capped": 0.1}, {"rank": 1, "sm_clock_mhz": 1500}]
    r = finish({"status": "correct", "timing": timing}, backend="nccl")
    assert r["sm_clock_mhz"] == 1500 and r["power_capped"] == 0.1


@pytest.mark.gpu
def test_watching_a_real_gpu_under_matmuls():
    import torch

    from pkroof.runtime.gpu_state import watches

    watch = watches(torch.device("cuda", 0))
    assert watch.index is not None, "NVML did not find this GPU by its UUID"
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    with watch("graph"):
        for _ in range(300):  # ~0.5 s of matmuls at 700 TFLOP/s: NVML's energy counter moves in steps
            a @ a
        torch.cuda.synchronize()
    s = watch.summary("graph")
    assert s["clock_samples"] >= 10
    assert 0 < s["sm_clock_min_mhz"] <= s["sm_clock_mhz"] <= s["sm_clock_max_mhz"]
    assert 0 < s["power_w"] < 2 * s["power_limit_w"] and 0.0 <= s["power_capped"] <= 1.0


@pytest.mark.gpu
def test_a_one_rank_job_records_its_gpus_state():
    # one NCCL rank on one GPU runs the whole timing path (eager, pilot, graph samples, the all-gather of states)
    from pkroof.analysis.catalogue import load
    from pkroof.profilers.run import Job, run_job

    params = load("all-reduce").params(None, {"size_bytes": 64 << 20})
    r = run_job(Job("all-reduce", "64 MiB", params, "reference", 1, "nccl"), timeout_s=120)
    assert r["status"] == "correct", r.get("message")
    (state,) = r["timing"]["gpu_state"]
    assert state["rank"] == 0 and state["clock_samples"] >= 1 and state["sm_clock_mhz"] > 0
