"""The probe without GPUs: fits on recorded samples, the measured topology, the orchestration, the no-GPU exit."""

import os
import time
from pathlib import Path

import pytest
import spawn_targets
from typer.testing import CliRunner

from pkroof.cli import app
from pkroof.runtime.nvml import Replay
from pkroof.topology import from_dict, load, to_dict
from pkroof.topology.discover import discover
from pkroof.topology.from_probe import build_topology, fit_curves
from pkroof.topology.probe import ProbeError, spawn

DATA = Path(__file__).parent / "data" / "h200x2"
RECORDED = load(DATA / "probe-2026-11-30.json")  # a full probe of the 2×H200 node
CURVES = {c.name: c for c in RECORDED.probe.curves}


def _bandwidth(curve, i=-1):
    size = curve.x[i] if curve.sweep == "size" else curve.size_bytes
    return size / curve.median_s[i]


def test_recorded_curves_are_verified_and_sampled():
    for curve in RECORDED.probe.curves:
        assert curve.verified, curve.name
        assert curve.num_samples >= 5
        assert all(lo <= med <= hi for lo, med, hi in zip(curve.p10_s, curve.median_s, curve.p90_s, strict=True))


def test_no_measured_rate_exceeds_the_raw_nvlink_rate():
    # 18 links × 26.562 GB/s (NVML's raw speed) = 478 GB/s per direction: nothing one-way may beat it
    limit = 18 * 26.562e9
    for name, curve in CURVES.items():
        if curve.mechanism != "nccl" and curve.direction != "bidirectional":
            assert max(_bandwidth(curve, i) for i in range(len(curve.x))) < limit, name


# Link bytes of one NCCL call of size S on 2 ranks (nccl-tests' size convention), as the model charges NCCL:
# ring all-reduce 2(n−1)/n·S = S; ring all-gather and reduce-scatter (n−1)/n·S = S/2; all-to-all sends the
# (n−1)/n of its buffer that is not its own = S/2; send/recv the whole message S.
NCCL_LINK_SCALE_2 = {
    "nccl all-reduce": 1.0,
    "nccl all-gather": 0.5,
    "nccl reduce-scatter": 0.5,
    "nccl all-to-all": 0.5,
    "nccl send-recv": 1.0,
}


def _regimes(all_fits):
    """curve name (mechanism name for copies) → its fits, smallest-size regime first."""
    out = {}
    for f in sorted(all_fits, key=lambda f: f.regime):
        out.setdefault(f.curve if f.mechanism == "nccl" else f.mechanism, []).append(f)
    return out


def test_fits_on_recorded_samples():
    regimes = _regimes(fit_curves(RECORDED.probe.curves, 2)[0])
    assert set(regimes) == {"copy-engine", "sm-load", "sm-store", "tma", *NCCL_LINK_SCALE_2}
    assert all(len(fs) == 1 for name, fs in regimes.items() if name not in NCCL_LINK_SCALE_2)  # copies: one line
    assert all(1 <= len(fs) <= 3 for fs in regimes.values())
    ce = regimes["copy-engine"][0]
    # at 1 GiB α (µs) is negligible against ms: β is within a few percent of S/t there
    assert ce.peak_bandwidth_Bps == pytest.approx(_bandwidth(CURVES["copy-engine pull"]), rel=0.05)
    # at 4 KiB the transfer term 4 KiB/β is ~10 ns against µs of latency, so t(4 KiB) ≈ α
    assert ce.latency_s == pytest.approx(CURVES["copy-engine pull"].median_s[0], rel=0.15)
    assert ce.per_cta_bandwidth_Bps is None and ce.ctas_for_90pct == 0
    assert ce.efficient_size_bytes == pytest.approx(9 * ce.latency_s * ce.bandwidth_Bps)
    store = CURVES["sm-store push by CTAs"]
    best = max(_bandwidth(store, i) for i in range(len(store.x)))
    first = next(k for i, k in enumerate(store.x) if _bandwidth(store, i) >= 0.9 * best)
    assert regimes["sm-store"][0].ctas_for_90pct == first
    # the model, the cheapest regime's line at each size, is the samples' lower envelope: never slower than any
    # sample, and tight at one
    for name, fs in regimes.items():
        curve = CURVES[fs[0].curve]
        scale = NCCL_LINK_SCALE_2.get(name, 1.0)
        model = [min(f.latency_s + scale * s / f.bandwidth_Bps for f in fs) for s in curve.x]
        assert all(m <= t * (1 + 1e-9) for m, t in zip(model, curve.median_s, strict=True)), name
        assert any(m == pytest.approx(t, rel=1e-9) for m, t in zip(model, curve.median_s, strict=True)), name
        link_rate = max(scale * _bandwidth(curve, i) for i in range(len(curve.x)))
        assert max(f.peak_bandwidth_Bps for f in fs) >= link_rate * (1 - 1e-9), name
        errors = [(t - m) / t for m, t in zip(model, curve.median_s, strict=True)]
        assert all(f.size_max_rel_error == pytest.approx(max(errors)) for f in fs), name  # the whole model's
    # at 1 GiB the µs of latency vanish: each collective's largest-size β is its link rate there, S·scale/t
    for name, scale in NCCL_LINK_SCALE_2.items():
        assert regimes[name][-1].bandwidth_Bps == pytest.approx(scale * _bandwidth(CURVES[name]), rel=0.05), name


def test_nccl_regimes_follow_the_samples_closer_than_one_line():
    """One α-β line per collective misses NCCL's mid sizes (protocol and channel switches); the regimes must not
    do worse than it anywhere in the worst case, and on the recorded all-gather far better."""
    from pkroof.topology.fit import envelope_size_sweep

    for name, scale in NCCL_LINK_SCALE_2.items():
        curve = CURVES[name]
        link = [scale * s for s in curve.x]
        one = envelope_size_sweep(link, curve.median_s)
        fs = _regimes(fit_curves(RECORDED.probe.curves, 2)[0])[name]
        assert fs[0].size_max_rel_error <= one.max_rel_error + 1e-12, name
    ag = _regimes(fit_curves(RECORDED.probe.curves, 2)[0])["nccl all-gather"]
    one = envelope_size_sweep([0.5 * s for s in CURVES["nccl all-gather"].x], CURVES["nccl all-gather"].median_s)
    assert ag[0].size_max_rel_error < one.max_rel_error / 2


def test_measured_nccl_has_regimes_per_collective():
    """Every collective the probe timed carries its own regimes; the general NCCL model is the all-reduce's."""
    from pkroof.topology.from_probe import NCCL_STEP_S, refit

    nccl = refit(RECORDED).mechanisms["nccl"]
    regimes = {n.removeprefix("nccl "): fs for n, fs in _regimes(fit_curves(RECORDED.probe.curves, 2)[0]).items()}
    assert set(nccl.collectives) == {n.removeprefix("nccl ") for n in NCCL_LINK_SCALE_2}
    ar = regimes["all-reduce"]
    assert [c.peak_bandwidth_Bps for c in nccl.collectives["all-reduce"]] == [f.peak_bandwidth_Bps for f in ar]
    # a ring all-reduce on 2 ranks is 2(n−1) = 2 dependent steps: fitted latency = α + 1 step
    assert nccl.collectives["all-reduce"][0].latency_s == pytest.approx(ar[0].latency_s - NCCL_STEP_S)
    # general model: the all-reduce's small-size α and large-size β
    assert nccl.latency_s == nccl.collectives["all-reduce"][0].latency_s
    assert nccl.peak_bandwidth_Bps == ar[-1].peak_bandwidth_Bps
    # an all-gather on 2 ranks is n−1 = 1 step: α is the whole fitted latency, regime by regime
    ag = regimes["all-gather"]
    assert [c.latency_s for c in nccl.collectives["all-gather"]] == pytest.approx([f.latency_s for f in ag])


def _measured_topology(**ceilings: float):
    """The topology `pkroof probe` builds from the recorded 2×H200 probe and NVML, with `ceilings` set on top."""
    record = {
        "world": 2,
        "gpu_name": RECORDED.gpu.name,
        "capability": [9, 0],
        "sm_count": RECORDED.gpu.sm_count,
        "hbm_capacity_bytes": RECORDED.gpu.hbm_capacity_bytes,
    }
    fits, _ = fit_curves(RECORDED.probe.curves, 2)
    probe = RECORDED.probe.__class__(
        **{**RECORDED.probe.__dict__, "fits": fits, "ceilings": RECORDED.probe.ceilings | ceilings}
    )
    return build_topology("h200x2", record, discover(Replay.load(DATA / "nvml.json")), probe)


def test_measured_topology_from_recorded_probe_and_nvml():
    t = _measured_topology()
    assert t.scaleup.kind == "nvswitch" and t.scaleup.links_per_gpu == 18
    assert t.scaleup.total_bandwidth_Bps == pytest.approx(18 * 26.562e9)
    assert t.gpu.arch == "hopper"
    for name in ("copy-engine", "sm-load", "sm-store", "tma", "nccl"):
        spec = t.mechanisms[name]
        assert spec.available and t.basis(f"mechanisms.{name}.peak_bandwidth_Bps") == "measured"
        assert spec.peak_bandwidth_Bps < t.scaleup.total_bandwidth_Bps
    assert not t.mechanisms["multimem"].available
    assert from_dict(to_dict(t)) == t


def test_the_sustained_matmul_rate_is_sourced_and_never_above_the_burst():
    # bf16 sustained at 0.85 of the burst is kept as measured; fp16's at 1.02 (run-to-run noise after a burst on
    # an idle GPU) is clipped to its burst, so no prediction is ever charged more than the roof's rate
    burst = {d: RECORDED.probe.ceilings[f"matmul_{d}_flops"] for d in ("bf16", "fp16")}
    t = _measured_topology(
        matmul_bf16_sustained_flops=0.85 * burst["bf16"], matmul_fp16_sustained_flops=1.02 * burst["fp16"]
    )
    assert t.gpu.sustained_flops == {"bf16": pytest.approx(0.85 * burst["bf16"]), "fp16": burst["fp16"]}
    assert t.basis("gpu.sustained_flops") == "measured"
    assert t.system(2).sustained_flops_for("bf16") == pytest.approx(0.85 * burst["bf16"])
    assert t.system(2).sustained_flops_for("fp8") == t.gpu.peak_flops["fp8"]  # none measured: the peak


def test_each_matmul_runs_with_its_own_tf32_setting_whatever_was_built_last():
    # the probe builds every dtype's matmul, times their bursts, then times each again for the sustained rate:
    # the fp32 one must not run as tf32 because the tf32 one was built after it (nor the other way round)
    from types import SimpleNamespace

    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from pkroof.topology.probe_worker import Rank

    before = torch.backends.cuda.matmul.allow_tf32
    try:
        rank = SimpleNamespace(device="cpu")
        fp32, tf32 = Rank._matmul(rank, "fp32", 8), Rank._matmul(rank, "tf32", 8)
        fp32(0)
        assert torch.backends.cuda.matmul.allow_tf32 is False
        tf32(0)
        assert torch.backends.cuda.matmul.allow_tf32 is True
        fp32(0)
        assert torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_spawn_runs_every_rank(tmp_path):
    spawn(spawn_targets.writes_file, 3, (str(tmp_path),), 60, print)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0", "rank1", "rank2"]


def test_a_failing_rank_stops_the_others(tmp_path):
    with pytest.raises(ProbeError, match="rank 1 failed \\(exit code 3\\)"):
        spawn(spawn_targets.rank1_fails, 2, (str(tmp_path),), 900, print)
    assert not (tmp_path / "rank0-done").exists()  # rank 0 sleeps 600 s: it was stopped, not waited for


def test_a_hanging_probe_is_stopped_at_its_deadline(tmp_path):
    with pytest.raises(ProbeError, match="did not finish in 3 s"):
        spawn(spawn_targets.hangs, 2, (str(tmp_path),), 3, print)
    for pid_file in tmp_path.glob("pid*"):
        pid = int(pid_file.read_text())
        with pytest.raises(ProcessLookupError):  # no process is left behind
            os.kill(pid, 0)


def test_sigterm_during_a_probe_stops_its_ranks_too(tmp_path):
    import signal
    import threading

    from pkroof.runtime.launch import TerminatedError

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:  # a runner's own handler would take the signal
        pytest.skip("SIGTERM is handled by the test runner here")
    # SIGTERM to this process 2 s in, while both ranks sleep for 120 s: it must reach the launcher as
    # TerminatedError (a KeyboardInterrupt, exit 128 + 15 in the CLI) with no rank left running
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        with pytest.raises(TerminatedError):
            spawn(spawn_targets.hangs, 2, (str(tmp_path),), 60, print)
    finally:
        timer.cancel()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is this call's only
    pids = [int(p.read_text()) for p in tmp_path.glob("pid*")]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_probe_without_gpus_says_so_in_one_line(monkeypatch):
    class NoGpu:
        def query(self, name, *args):
            from pkroof.runtime.nvml import NA

            return NA(f"{name}: NVML Shared Library Not Found")

    import pkroof.topology.probe as probe_module

    monkeypatch.setattr(probe_module, "Nvml", NoGpu)
    result = CliRunner().invoke(app, ["probe", "--out", "never.json"])
    assert result.exit_code == 2  # nothing to probe here: bad input, as docs/cli.md says of every command
    assert result.stderr.count("\n") == 1
    assert "no NVIDIA GPU found" in result.stderr and "pkroof presets" in result.stderr
    assert not Path("never.json").exists()


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 72])
def test_pair_rounds_cover_every_pair_once_with_disjoint_pairs(n):
    from itertools import combinations

    from pkroof.topology.probe_plan import pair_rounds

    rounds = pair_rounds(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)  # circle method: n−1 rounds, one more with a bye
    seen = [pair for r in rounds for pair in r]
    assert sorted(seen) == sorted(combinations(range(n), 2))  # every unordered pair exactly once
    for r in rounds:
        gpus = [g for pair in r for g in pair]
        assert len(gpus) == len(set(gpus))  # a GPU is in at most one pair per round


def test_a_slow_pair_is_flagged():
    from pkroof.topology.probe import _pair_flags

    pairs = {"0<-1": 390e9, "1<-0": 392e9, "2<-3": 391e9, "3<-2": 250e9}
    flags = _pair_flags(pairs)
    assert len(flags) == 1 and flags[0].startswith("GPU pair 3<-2: 250 GB/s")


def test_refit_rebuilds_mechanisms_from_recorded_curves():
    from pkroof.topology.from_probe import refit

    again = refit(RECORDED)
    fits = {f.mechanism: f for f in again.probe.fits}
    assert again.mechanisms["copy-engine"].peak_bandwidth_Bps == fits["copy-engine"].peak_bandwidth_Bps
    assert again.probe.curves == RECORDED.probe.curves
    assert from_dict(to_dict(again)) == again


def test_the_both_ways_rate_is_the_envelope_of_the_bidirectional_curve_and_never_above_one_way():
    from pkroof.topology import resolve
    from pkroof.topology.from_probe import duplex_rates, refit
    from pkroof.topology.model import Curve

    # a bidirectional curve that is exactly α + S/β (α = 5 µs, β = 300 GB/s): its lower envelope is that line
    sizes = (1 << 20, 16 << 20, 256 << 20)
    times = tuple(5e-6 + s / 300e9 for s in sizes)
    curve = Curve("sm-load bidirectional", "sm-load", "bidirectional", "size", 132, 0, "graph", sizes, times,
                  times, times, 10, True)  # fmt: skip
    assert duplex_rates((curve,)) == {"sm-load": pytest.approx(300e9)}
    unverified = Curve(*[getattr(curve, f) for f in ("name", "mechanism", "direction", "sweep", "num_ctas",
                       "size_bytes", "mode", "x", "median_s", "p10_s", "p90_s", "num_samples")], False)  # fmt: skip
    assert duplex_rates((unverified,)) == {}
    # the shipped h200x2 preset: every mechanism the probe timed both ways has a both-ways rate below its one-way
    # peak (SM loads lose the most: the probe measured 336 GB/s at 1 GiB both ways against 375 one way)
    preset = refit(resolve("h200x2"))
    for name in ("copy-engine", "sm-load", "sm-store", "tma"):
        spec = preset.mechanisms[name]
        assert 0 < spec.duplex_bandwidth_Bps <= spec.peak_bandwidth_Bps, name
        assert spec.sources["duplex_bandwidth_Bps"] == "probe"
    load = preset.mechanisms["sm-load"]
    assert load.duplex_bandwidth_Bps < 0.92 * load.peak_bandwidth_Bps


def test_refit_keeps_hand_offs_measured_by_the_profiler_and_a_hand_off_needs_a_source():
    import dataclasses

    from pkroof.topology import resolve
    from pkroof.topology.from_probe import refit
    from pkroof.topology.model import MechanismSpec

    # the shipped h200x2 preset carries hand-offs measured from pkroof's kernels (not from the probe's curves)
    preset = resolve("h200x2")
    assert preset.mechanisms["sm-store"].handoff_s > 0
    again = refit(preset)
    for name, spec in preset.mechanisms.items():
        assert again.mechanisms[name].handoff_s == spec.handoff_s, name
        if spec.handoff_s:
            assert again.mechanisms[name].sources["handoff_s"] == spec.sources["handoff_s"]
            assert spec.sources["handoff_s"] in again.sources
    store = preset.mechanisms["sm-store"]
    unsourced = {k: v for k, v in store.sources.items() if k != "handoff_s"}
    with pytest.raises(ValueError, match=r"sources\.handoff_s"):
        MechanismSpec(**{f.name: getattr(store, f.name) for f in dataclasses.fields(store)} | {"sources": unsourced})


def test_refit_keeps_every_number_the_profiler_calibrated():
    import dataclasses

    from pkroof.topology import resolve
    from pkroof.topology.from_probe import refit

    # a node calibrated for LL kernels and fused kernels too: a refit of the probe's curves keeps all of it
    preset = resolve("h200x2")
    store = preset.mechanisms["sm-store"]
    source = store.sources["handoff_s"]
    calibrated = dataclasses.replace(
        store,
        ll_handoff_s=1.25e-6,
        overlap_s={"inter-sm": 4e-6},
        sources=store.sources | {"ll_handoff_s": source, "overlap_s": source},
    )
    node = dataclasses.replace(preset, mechanisms=preset.mechanisms | {"sm-store": calibrated})
    again = refit(node).mechanisms["sm-store"]
    assert (again.handoff_s, again.ll_handoff_s, again.overlap_s) == (store.handoff_s, 1.25e-6, {"inter-sm": 4e-6})
    assert again.sources["ll_handoff_s"] == again.sources["overlap_s"] == source


def test_ctrl_c_leaves_no_rank_behind(tmp_path):
    pytest.importorskip("torch")  # the spawned ranks rendezvous through torch's FileStore
    import signal
    import subprocess
    import sys

    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import spawn_targets\n"
        "from pkroof.topology.probe import spawn\n"
        f"spawn(spawn_targets.hangs, 2, ({str(tmp_path)!r},), 900, print)\n"  # Ctrl-C ends it, not the deadline
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300  # start-up on a busy machine: a poll, no time asserted
    while len(list(tmp_path.glob("pid*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    parent.send_signal(signal.SIGINT)
    parent.wait(timeout=300)
    assert "KeyboardInterrupt" in parent.stderr.read()
    for pid_file in tmp_path.glob("pid*"):
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text()), 0)


@pytest.mark.parametrize("world", [2, 4])
def test_spawned_ranks_rendezvous_over_gloo(tmp_path, world):
    pytest.importorskip("torch")
    from pkroof.runtime.launch import free_port

    spawn(spawn_targets.gloo_all_reduce, world, (free_port(), str(tmp_path)), 120, print)
    # every rank holds 1 + 2 + … + world after the all-reduce
    assert [float((tmp_path / f"rank{r}").read_text()) for r in range(world)] == [world * (world + 1) / 2] * world


def test_a_taken_rendezvous_port_is_retried_not_recorded_as_a_crash(monkeypatch):
    # seen on 2xH200: the port free_port() picked was taken before rank 0 listened on it (EADDRINUSE), and a
    # correct implementation was recorded as crashed. Hand the launcher a port that is listening already.
    pytest.importorskip("torch")
    import socket

    from pkroof.runtime import launch

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    picks = iter([busy.getsockname()[1]])
    real = launch.free_port
    monkeypatch.setattr(launch, "free_port", lambda: next(picks, None) or real())
    try:
        results = launch.run_ranks(spawn_targets.rank_and_sum, 2, timeout_s=120)
    finally:
        busy.close()
    assert results == [(0, 3.0), (1, 3.0)]  # both ranks, and 1 + 2 after the all-reduce


def test_every_rank_the_launcher_starts_keeps_nvlink_multicast_off_whatever_the_environment_says(monkeypatch):
    pytest.importorskip("torch")  # every rank joins a process group
    from pkroof.runtime import launch

    # a parent environment that says nothing: each rank (profiler and probe alike) switches NCCL's NVLS, torch's
    # symmetric-memory multicast and NVSHMEM's NVLS off before torch is imported
    for key in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        monkeypatch.delenv(key, raising=False)
    off = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    assert launch.run_ranks(spawn_targets.multicast_env, 2, timeout_s=120) == [off, off]
    # NCCL_NVLS_ENABLE set to 1 by a shell or an image is not a request to pkroof: still off
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "0")
    assert launch.run_ranks(spawn_targets.multicast_env, 2, timeout_s=120) == [off, off]


def test_only_the_probes_allow_multicast_flag_leaves_the_nvls_variables_alone(monkeypatch):
    import os

    from pkroof.runtime.launch import keep_multicast_off

    monkeypatch.setattr(os, "environ", {"NCCL_NVLS_ENABLE": "1"})  # this process's real environment stays as it was
    keep_multicast_off(allowed=True)  # a probe rank under `pkroof probe --allow-multicast`
    assert os.environ["NCCL_NVLS_ENABLE"] == "1"
    keep_multicast_off()  # anything else
    assert os.environ["NCCL_NVLS_ENABLE"] == "0" and os.environ["NVSHMEM_DISABLE_NVLS"] == "1"


def test_the_probe_starts_its_ranks_again_when_their_port_was_taken(tmp_path):
    from pkroof.topology.probe import ProbeError, spawn_on_fresh_ports

    lines = []
    spawn_on_fresh_ports(spawn_targets.port_taken_once, 2, lambda port: (port, str(tmp_path)), 60, lines.append)
    assert (tmp_path / "taken").exists() and (tmp_path / "rank0").exists()  # the first start failed, a second ran
    assert any("port was taken" in line and "again" in line for line in lines)
    # a port taken at every start is one clear error, not a loop
    with pytest.raises(ProbeError, match="on 3 tries"):
        spawn_on_fresh_ports(spawn_targets.port_always_taken, 2, lambda port: (port, str(tmp_path)), 60, print)


def test_the_measured_preset_holds_curves_and_fits():
    import json

    result = CliRunner().invoke(app, ["topology", "show", "h200x2", "--json"])
    data = json.loads(result.stdout)
    curves = {c["name"]: c for c in data["probe"]["curves"]}
    sizes = [4096 * 4**i for i in range(10)]  # 4 KiB … 1 GiB
    for name in (
        "copy-engine pull",
        "copy-engine push",
        "sm-load pull",
        "sm-store push",
        "nccl all-reduce",
        "nccl all-gather",
        "nccl reduce-scatter",
        "nccl all-to-all",
        "nccl send-recv",
    ):
        assert curves[name]["x"] == sizes, name
        assert curves[name]["verified"] and len(curves[name]["samples_s"][0]) >= 5
    for name in ("sm-load pull by CTAs", "sm-store push by CTAs"):
        assert curves[name]["x"][0] == 1 and curves[name]["x"][-1] == data["gpu"]["sm_count"]
    assert {f["mechanism"] for f in data["probe"]["fits"]} >= {"copy-engine", "sm-load", "sm-store", "nccl"}
    assert data["sources"]["probe"]["basis"] == "measured"


def test_node_notes_name_each_node_and_differences():
    from pkroof.topology.probe import _node_notes

    seen = [
        {"host": "a", "ports": ["mlx5_0:1 400 Gb/sec (4X NDR) InfiniBand"], "gpudirect": True, "health": []},
        {"host": "a", "ports": ["mlx5_0:1 400 Gb/sec (4X NDR) InfiniBand"], "gpudirect": True, "health": []},
        {"host": "b", "ports": [], "gpudirect": False, "health": ["GPU0: PCIe gen 3 of 5"]},
    ]
    notes = _node_notes(seen)
    assert len(notes) == 3  # two nodes (ranks on one host count once), then the difference
    assert notes[0].startswith("node a: 1 active HCA ports") and "GPUDirect RDMA yes" in notes[0]
    assert notes[1] == "node b: 0 active HCA ports (none), GPUDirect RDMA no; GPU0: PCIe gen 3 of 5"
    assert "differ" in notes[2]


def test_refit_of_a_multi_node_probe_counts_every_rank():
    """The rehearsal ran 2 nodes × 1 GPU: NCCL spanned 2 ranks, so refit must size its link bytes for 2 (with
    1 rank per node, a ring all-reduce of S would put 0 bytes on the link and no line could be fitted)."""
    from pkroof.topology.from_probe import refit

    rehearsal = load(DATA / "probe-rehearsal-2nodes.json")  # benchmarks/probe/device_run_rehearsal.sh on 2026-11-30
    assert (rehearsal.nodes, rehearsal.gpus_per_node) == (2, 1)
    again = refit(rehearsal)
    ar = next(c for c in again.probe.curves if c.name == "nccl all-reduce")
    # ring all-reduce on n = 2 ranks: 2(n−1)/n·S = S on the link; at the largest size latency is a small part
    fit = max((f for f in again.probe.fits if f.curve == ar.name), key=lambda f: f.regime)
    assert fit.peak_bandwidth_Bps >= ar.x[-1] / ar.median_s[-1] * (1 - 1e-9)
    assert again.mechanisms["nccl"].available
    assert "across 2 nodes" in again.mechanisms["nccl"].note  # the cross-node rate says what it is
    assert "across" not in refit(RECORDED).mechanisms["nccl"].note  # one node: nothing to say


def test_a_timeout_says_what_each_rank_was_doing():
    from pkroof.runtime.launch import RankTimeoutError

    # ranks in different phases are named one by one; ranks that agree are one phase; silence is empty
    assert RankTimeoutError("x", {1: "timing", 0: "checking"}).where == "rank 0: checking, rank 1: timing"
    assert RankTimeoutError("x", {0: "timing", 1: "timing"}).where == "timing"
    assert RankTimeoutError("x", {1: "timing"}).where == "rank 1: timing"
    assert RankTimeoutError("x").where == ""
