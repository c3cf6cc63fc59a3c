"""NVML discovery on CPU: replays of what NVML answered on the 2×H200 node, edited copies of it, fake sysfs trees."""

import copy
import ctypes
import dataclasses
import json
import logging
import subprocess
import sys
import types
from pathlib import Path

import pytest

from pkroof.runtime.nvml import NA, Device, Nvml, Out, Recorder, Replay
from pkroof.topology.discover import GpuInfo, discover, health

FIXTURE = Path(__file__).parent / "data" / "h200x2" / "nvml.json"
RECORDED = json.loads(FIXTURE.read_text())

# shared/NODE-FACTS.md for this node: 143771 MiB per GPU, driver 580.159.04, nvidia-smi nvlink -s: 26.562 GB/s per link
H200_MEMORY_BYTES = 143771 * 2**20
LINK_MBPS = 26562
NUM_LINKS = 18
NVML_FI_DEV_NVLINK_GET_SPEED = 164  # nvml.h
NVML_NVLINK_ERROR_DL_CRC_DATA = 3  # nvml.h nvmlNvLinkErrorCounter_t


def _sysfs(recording: dict, root: Path) -> Path:
    """Lay the sysfs files the recording captured (content, directory listing, or absent) under `root`."""
    for path, content in recording.get("sysfs", {}).items():
        target = root / path.lstrip("/")
        if isinstance(content, list):
            target.mkdir(parents=True, exist_ok=True)
        elif isinstance(content, str):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
    return root


def _discover(recording: dict, root: Path):
    return discover(Replay(recording), sysfs_root=_sysfs(recording, root))


def _recorded_crc_data(gpu: int) -> dict[int, int]:
    """CRC-data counter per link, read straight from the recording."""
    calls = RECORDED["calls"]
    return {
        link: calls[f"nvmlDeviceGetNvLinkErrorCounter(gpu{gpu}, {link}, {NVML_NVLINK_ERROR_DL_CRC_DATA})"]["value"]
        for link in range(NUM_LINKS)
    }


def _without_crc_data_errors(recording: dict) -> dict:
    edited = copy.deepcopy(recording)
    for key, answer in edited["calls"].items():
        if key.startswith("nvmlDeviceGetNvLinkErrorCounter(") and "value" in answer:
            answer["value"] = 0
    return edited


@pytest.fixture
def clean() -> dict:
    """The recording with its cumulative NVLink error counters zeroed: a node with nothing to flag."""
    return _without_crc_data_errors(RECORDED)


def _new_flags(edited: dict, tmp_path: Path) -> set[str]:
    base = health(_discover(_without_crc_data_errors(RECORDED), tmp_path / "base"))
    return set(health(_discover(edited, tmp_path / "edited"))) - set(base)


def test_recorded_node(tmp_path):
    d = _discover(RECORDED, tmp_path)
    assert d.num_gpus == 2 and len(d.gpus) == 2
    assert d.driver_version == "580.159.04"
    for gpu in d.gpus:
        assert gpu.name == "NVIDIA H200"
        assert gpu.memory_total_bytes == H200_MEMORY_BYTES
        assert [link.link for link in gpu.active_nvlinks] == list(range(NUM_LINKS))
        assert gpu.nvlinks == gpu.active_nvlinks  # links 18..35 answered Invalid Argument, so are not listed
        for link in gpu.nvlinks:
            assert link.state == "ACTIVE"
            assert link.version == "NVLink 4.0"  # NVML answered 6: NVML_NVLINK_VERSION_4_0
            assert link.remote_type == "SWITCH"
            assert link.remote_pci_bus_id == "FFFFFFFF:FF:FF.0"
            assert link.speed_MBps == LINK_MBPS
        assert gpu.fabric.state == "COMPLETED"
        assert isinstance(gpu.numa_node, NA)  # NVML: Not Supported; sysfs: -1 (a VM's GPUs have no NUMA affinity)
        assert gpu.clock_event_reasons == ("gpu_idle",)
    assert {(p.src, p.dst) for p in d.p2p} == {(0, 1), (1, 0)}
    for pair in d.p2p:
        assert (pair.read, pair.write, pair.nvlink) == ("OK", "OK", "OK")
    assert isinstance(d.num_nvswitches, NA) and "FFFFFFFF:FF:FF.0" in d.num_nvswitches.reason
    assert isinstance(d.multicast_supported, NA)
    assert d.hca_ports == () and d.gpudirect_rdma is False


def test_recorded_node_flags_only_its_cumulative_crc_data_counters(tmp_path):
    expected = []
    for gpu in (0, 1):
        counts = _recorded_crc_data(gpu)
        worst = max(counts, key=counts.__getitem__)
        expected.append(
            f"GPU{gpu}: NVLink crc data error counter non-zero on {NUM_LINKS} of {NUM_LINKS} links, "
            f"{sum(counts.values())} in all (most: link {worst}, {counts[worst]}; cumulative since the driver loaded)"
        )
    assert all(_recorded_crc_data(0).values())  # the node really reports them: every link, a few each
    assert health(_discover(RECORDED, tmp_path)) == expected


def test_recorded_node_without_error_counts_has_no_flags(clean, tmp_path):
    assert health(_discover(clean, tmp_path)) == []


def test_link_down(clean, tmp_path):
    clean["calls"]["nvmlDeviceGetNvLinkState(gpu1, 5)"]["value"] = 0
    assert _new_flags(clean, tmp_path) == {f"GPU1: NVLink 5 down while {NUM_LINKS - 1} sibling links are up"}


def test_link_slower_than_siblings(clean, tmp_path):
    key = next(k for k in clean["calls"] if k.startswith("nvmlDeviceGetFieldValues(gpu0, [[164, 3]"))
    entry = clean["calls"][key]["value"][0]
    assert (entry["fieldId"], entry["scopeId"]) == (NVML_FI_DEV_NVLINK_GET_SPEED, 3)
    entry["value"]["uiVal"] = 20000
    assert _new_flags(clean, tmp_path) == {f"GPU0: NVLink 3 at 20000 MB/s, slower than its siblings ({LINK_MBPS} MB/s)"}


def test_pcie_width_x8_of_x16(clean, tmp_path):
    assert clean["calls"]["nvmlDeviceGetMaxPcieLinkWidth(gpu1)"]["value"] == 16
    clean["calls"]["nvmlDeviceGetCurrPcieLinkWidth(gpu1)"]["value"] = 8
    assert _new_flags(clean, tmp_path) == {"GPU1: PCIe width x8 below max x16"}


def test_pcie_generation_below_max_says_idle_gpus_downshift(clean, tmp_path):
    clean["calls"]["nvmlDeviceGetCurrPcieLinkGeneration(gpu0)"]["value"] = 1
    assert _new_flags(clean, tmp_path) == {
        "GPU0: PCIe gen 1 below max gen 5 (idle GPUs downshift; re-check under load)"
    }


def test_thermal_throttle(clean, tmp_path):
    gpu_idle, hw_thermal_slowdown = 0x1, 0x40  # nvml.h nvmlClocksEventReason*
    clean["calls"]["nvmlDeviceGetCurrentClocksEventReasons(gpu0)"]["value"] = gpu_idle | hw_thermal_slowdown
    assert _new_flags(clean, tmp_path) == {"GPU0: clocks held back by hw_thermal_slowdown"}


def test_different_product_names(clean, tmp_path):
    clean["calls"]["nvmlDeviceGetName(gpu1)"]["value"] = "NVIDIA H20"
    assert _new_flags(clean, tmp_path) == {"GPUs differ: GPU0 NVIDIA H200, GPU1 NVIDIA H20"}


def test_hca_and_gpudirect_rdma_from_sysfs(tmp_path):
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    port.mkdir(parents=True)
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    (port / "state").write_text("4: ACTIVE\n")
    (port / "link_layer").write_text("InfiniBand\n")
    (tmp_path / "sys/module/nvidia_peermem").mkdir(parents=True)
    d = discover(Replay({}), sysfs_root=tmp_path)
    (hca,) = d.hca_ports
    assert (hca.device, hca.port, hca.rate_Gbps, hca.state, hca.link_layer) == (
        "mlx5_0",
        1,
        400.0,
        "ACTIVE",
        "InfiniBand",
    )
    assert hca.rate_Bps == 400e9 / 8
    assert hca.kind == "infiniband"
    assert d.gpudirect_rdma is True


def test_no_hcas_no_peermem(tmp_path):
    d = discover(Replay({}), sysfs_root=tmp_path)
    assert d.hca_ports == () and d.gpudirect_rdma is False


def test_empty_recording_answers_na_everywhere(tmp_path):
    d = discover(Replay({}), sysfs_root=tmp_path)
    for name in ("driver_version", "cuda_driver_version", "nvml_version", "num_gpus", "num_nvswitches"):
        assert isinstance(getattr(d, name), NA), name
    assert d.gpus == () and d.p2p == ()
    assert health(d) == []


def test_gpu_whose_every_query_fails_is_all_na(tmp_path):
    d = discover(Replay({"calls": {"nvmlDeviceGetCount()": {"value": 1}}}), sysfs_root=tmp_path)
    (gpu,) = d.gpus
    for f in dataclasses.fields(GpuInfo):
        if f.name not in ("index", "nvlinks"):
            assert isinstance(getattr(gpu, f.name), NA), f.name
    assert gpu.index == 0 and gpu.nvlinks == ()
    assert health(d) == []


def test_discover_imports_and_replays_without_pynvml():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pynvml':\n"
        "            raise ImportError('blocked pynvml')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from pkroof.topology.discover import discover\n"
        "from pkroof.runtime.nvml import Nvml, Replay, NA\n"
        f"d = discover(Replay.load({str(FIXTURE)!r}))\n"
        "assert d.num_gpus == 2\n"
        "d = discover(Nvml())\n"
        "assert isinstance(d.num_gpus, NA) and 'not installed' in d.num_gpus.reason, d.num_gpus\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_missing_library_is_na_and_logged_once(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    nvml = Nvml()
    with caplog.at_level(logging.INFO, logger="pkroof.runtime.nvml"):
        first = nvml.query("nvmlDeviceGetName", Device(0))
        second = nvml.query("nvmlDeviceGetName", Device(1))
    assert isinstance(first, NA) and "pynvml is not installed" in first.reason
    assert isinstance(second, NA)
    assert len(caplog.records) == 1


class _Pci(ctypes.Structure):
    _fields_ = [("busId", ctypes.c_char * 16), ("domain", ctypes.c_uint)]


class _Value(ctypes.Union):
    _fields_ = [("uiVal", ctypes.c_uint), ("ullVal", ctypes.c_ulonglong)]


class _Fabric(ctypes.Structure):
    _fields_ = [("uuid", ctypes.c_uint8 * 4), ("state", ctypes.c_uint), ("value", _Value)]


def _fake_pynvml() -> types.ModuleType:
    """A stand-in for pynvml with the shapes real pynvml answers in: ints, bytes, ctypes structs, out-structs."""
    fake = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def get_pci(handle):
        return _Pci(b"00000000:19:00.0", 0)

    def get_fabric(handle, out):
        out._obj.state = 3
        out._obj.uuid[1] = 7
        out._obj.value.uiVal = 9
        return 0

    def not_supported(handle, link):
        raise NVMLError("Not Supported")

    fake.NVMLError = NVMLError
    fake._Fabric = _Fabric
    fake.nvmlInit = lambda: None
    fake.nvmlShutdown = lambda: None
    fake.nvmlDeviceGetHandleByIndex = lambda i: f"handle{i}"
    fake.nvmlDeviceGetCount = lambda: 1
    fake.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    fake.nvmlDeviceGetPciInfo = get_pci
    fake.nvmlDeviceGetGpuFabricInfoV = get_fabric
    fake.nvmlDeviceGetNvLinkState = not_supported
    return fake


def test_recorder_makes_json_and_replay_answers_the_same(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    recorder = Recorder(Nvml())
    calls = [
        ("nvmlDeviceGetCount",),
        ("nvmlDeviceGetName", Device(0)),
        ("nvmlDeviceGetPciInfo", Device(0)),
        ("nvmlDeviceGetGpuFabricInfoV", Device(0), Out("_Fabric")),
        ("nvmlDeviceGetNvLinkState", Device(0), 0),
        ("nvmlDeviceGetNoSuchThing", Device(0)),
    ]
    live = [recorder.query(*c) for c in calls]
    assert live[1] == "NVIDIA H200"  # bytes → str
    assert live[2] == {"busId": "00000000:19:00.0", "domain": 0}  # struct → dict of its fields
    assert live[3] == {"uuid": [0, 7, 0, 0], "state": 3, "value": {"uiVal": 9, "ullVal": 9}}  # the filled out-struct
    assert isinstance(live[4], NA) and live[4].reason == "nvmlDeviceGetNvLinkState: Not Supported"
    assert isinstance(live[5], NA)

    recording = json.loads(json.dumps(recorder.recording(host="test")))
    replay = Replay(recording)
    for c, answer in zip(calls, live, strict=True):
        again = replay.query(*c)
        assert again == answer
        if isinstance(answer, NA):
            assert again.reason == answer.reason
    unrecorded = replay.query("nvmlDeviceGetName", Device(1))
    assert isinstance(unrecorded, NA) and "not in the recording" in unrecorded.reason


def test_reduced_nvlink_bandwidth_mode_is_flagged():
    recording = json.loads(FIXTURE.read_text())
    assert not any("bandwidth mode" in flag for flag in health(discover(Replay(recording))))
    recording["calls"]["nvmlSystemGetNvlinkBwMode()"] = {"value": 2}
    flags = health(discover(Replay(recording)))
    assert any("NVLink bandwidth mode 2" in flag for flag in flags)
