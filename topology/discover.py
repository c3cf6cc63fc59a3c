"""What NVML and sysfs say about this node, as plain frozen data, and the health flags read from it.

    from pkroof.runtime.nvml import Nvml
    d = discover(Nvml())            # or Replay.load("tests/data/h200x2/nvml.json") on a laptop
    print(*health(d), sep="\\n")

Every NVML call goes through `nvml.query` (see nvml.py); a value NVML could not give is `NA` with the reason.
Enum values and bit masks below are NVML's, from nvml.h (NVML 13, mirrored by nvidia-ml-py 13.615).
Units are in the field names: MHz, W, C (degrees Celsius), MBps (10^6 bytes/s, as NVML reports link speed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkroof.runtime.nvml import NA, Device, Out

# nvml.h: NVML_NVLINK_MAX_LINKS (18 up to NVML 12, 36 from NVML 13); links past a GPU's own answer NA
NVLINK_MAX_LINKS = 36
# nvml.h nvmlNvlinkVersion_t: the enum value, not the version number (6 is NVML_NVLINK_VERSION_4_0)
NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
# nvml.h NVML_NVLINK_STATE_* (SLEEP: up, in a low-power state)
NVLINK_STATES = {0: "INACTIVE", 1: "ACTIVE", 2: "SLEEP"}
# nvml.h NVML_NVLINK_DEVICE_TYPE_*
NVLINK_REMOTE_TYPES = {0: "GPU", 1: "IBMNPU", 2: "SWITCH", 0xFF: "UNKNOWN"}
# nvml.h nvmlNvLinkErrorCounter_t: NVML_NVLINK_ERROR_DL_REPLAY, _RECOVERY, _CRC_FLIT, _CRC_DATA
NVLINK_ERROR_COUNTERS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
# nvml.h field ids; the *_DL_* and GET_SPEED ids take the link as scopeId
FI_NVLINK_SPEED_MBPS_L = (84, 85, 86, 87, 88, 89, 132, 133, 134, 135, 136, 137)  # NVML_FI_DEV_NVLINK_SPEED_MBPS_L0..L11
FI_NVLINK_LINK_COUNT = 91
FI_NVSWITCH_CONNECTED_LINK_COUNT = 147
FI_NVLINK_ERROR_DL = {"replay": 161, "recovery": 162, "crc_flit": 163}  # NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY, ...
FI_NVLINK_GET_SPEED = 164
# nvml.h nvmlValueType_t → the member of nvmlValue_t that holds the value
VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
# nvml.h nvmlClockType_t, nvmlTemperatureSensors_t
CLOCK_SM, CLOCK_MEM = 1, 2
TEMPERATURE_GPU = 0
# nvml.h nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2}
P2P_STATUS = {
    0: "OK",
    1: "CHIPSET_NOT_SUPPORTED",
    2: "GPU_NOT_SUPPORTED",
    3: "IOH_TOPOLOGY_NOT_SUPPORTED",
    4: "DISABLED_BY_REGKEY",
    5: "NOT_SUPPORTED",
    6: "UNKNOWN",
}
# nvml.h nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*) bits
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
BENIGN_CLOCK_EVENT_REASONS = frozenset({"gpu_idle"})
# nvml.h NVML_GPU_FABRIC_STATE_* and NVML_GPU_FABRIC_HEALTH_MASK_* (2-bit fields: 0 not supported, 1 true, 2 false)
FABRIC_STATES = {0: "NOT_SUPPORTED", 1: "NOT_STARTED", 2: "IN_PROGRESS", 3: "COMPLETED"}
FABRIC_HEALTH_SHIFTS = {
    "degraded_bandwidth": 0,
    "route_recovery": 2,
    "route_unhealthy": 4,
    "access_timeout_recovery": 6,
}
FABRIC_HEALTH_SUMMARIES = {0: "NOT_SUPPORTED", 1: "HEALTHY", 2: "UNHEALTHY", 3: "LIMITED_CAPACITY"}
# nvml.h nvmlReturn_t, the codes a fabric registration or a field value may carry
NVML_RETURNS = {0: "SUCCESS", 2: "INVALID_ARGUMENT", 3: "NOT_SUPPORTED", 4: "NO_PERMISSION", 21: "NO_DATA"}
NVML_RETURNS |= {27: "NOT_READY", 29: "INVALID_STATE", 999: "UNKNOWN"}
HIDDEN_BUS_ID_DOMAIN = "FFFFFFFF:"  # NVML reports FFFFFFFF:FF:FF.0 for a remote end it does not expose

MULTICAST_NA = NA(
    "NVML has no query for NVLink multicast (NVLS) support; CUDA's CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED has it"
)


@dataclass(frozen=True)
class NvLinkInfo:
    link: int
    state: str  # "ACTIVE", "INACTIVE" (down) or "SLEEP"
    version: str | NA  # "NVLink 4.0", decoded from NVML's enum
    remote_type: str | NA  # "GPU", "IBMNPU", "SWITCH" or "UNKNOWN"
    remote_pci_bus_id: str | NA  # "FFFFFFFF:FF:FF.0" where NVML hides the remote end
    speed_MBps: float | NA  # one direction, 10^6 bytes/s, raw (protocol overhead included)
    num_replay_errors: int | NA
    num_recovery_errors: int | NA
    num_crc_flit_errors: int | NA
    num_crc_data_errors: int | NA

    @property
    def active(self) -> bool:
        """Up: active, or asleep in a low-power state."""
        return self.state != "INACTIVE"

    @property
    def errors(self) -> dict[str, int]:
        """The error counters that NVML answered with a non-zero count."""
        counts = {name: getattr(self, f"num_{name}_errors") for name in NVLINK_ERROR_COUNTERS}
        return {k: v for k, v in counts.items() if not isinstance(v, NA) and v}


@dataclass(frozen=True)
class FabricInfo:
    """nvmlDeviceGetGpuFabricInfoV: the GPU's registration with the NVLink fabric manager."""

    state: str | NA  # NOT_SUPPORTED, NOT_STARTED, IN_PROGRESS, COMPLETED
    status: str | NA  # NVML return code of the registration, e.g. "SUCCESS"
    clique_id: int | NA
    cluster_uuid: str | NA
    health: dict[str, bool | NA]  # degraded_bandwidth, route_recovery, route_unhealthy, access_timeout_recovery
    health_summary: str | NA  # HEALTHY, UNHEALTHY, LIMITED_CAPACITY (struct v3 only)


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str | NA  # exact NVML product name
    uuid: str | NA
    pci_bus_id: str | NA  # NVML's form, "00000000:19:00.0"
    memory_total_bytes: int | NA
    sm_clock_MHz: int | NA
    sm_clock_max_MHz: int | NA
    memory_clock_MHz: int | NA
    memory_clock_max_MHz: int | NA
    clock_event_reasons: tuple[str, ...] | NA  # active reasons, () for none
    power_W: float | NA
    power_limit_W: float | NA
    temperature_C: int | NA
    pcie_generation: int | NA
    pcie_generation_max: int | NA
    pcie_width: int | NA
    pcie_width_max: int | NA
    numa_node: int | NA
    num_nvlinks: int | NA  # NVML_FI_DEV_NVLINK_LINK_COUNT
    num_nvswitch_links: int | NA  # NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT
    nvlinks: tuple[NvLinkInfo, ...]  # the links for which nvmlDeviceGetNvLinkState answered
    fabric: FabricInfo | NA

    @property
    def active_nvlinks(self) -> tuple[NvLinkInfo, ...]:
        return tuple(link for link in self.nvlinks if link.active)


@dataclass(frozen=True)
class P2PInfo:
    """nvmlDeviceGetP2PStatus from GPU `src` to GPU `dst`, per capability: "OK" or why not."""

    src: int
    dst: int
    read: str | NA
    write: str | NA
    nvlink: str | NA


@dataclass(frozen=True)
class HcaPort:
    """One port of an RDMA adapter, from /sys/class/infiniband/<device>/ports/<port>/."""

    device: str  # "mlx5_0"
    port: int
    rate_Gbps: float | NA  # from "400 Gb/sec (4X NDR)"
    rate_text: str | NA
    state: str | NA  # "ACTIVE", "DOWN", ...
    link_layer: str | NA  # "InfiniBand" or "Ethernet" (RoCE)

    @property
    def rate_Bps(self) -> float | NA:
        return self.rate_Gbps if isinstance(self.rate_Gbps, NA) else self.rate_Gbps * 1e9 / 8

    @property
    def kind(self) -> str | NA:
        """ "infiniband" or "roce", as Topology's NIC kinds."""
        layers = {"infiniband": "infiniband", "ethernet": "roce"}
        return self.link_layer if isinstance(self.link_layer, NA) else layers.get(self.link_layer.lower(), NA())


@dataclass(frozen=True)
class Discovery:
    driver_version: str | NA
    cuda_driver_version: int | NA  # NVML's form: 13000 is CUDA 13.0
    nvml_version: str | NA
    num_gpus: int | NA
    gpus: tuple[GpuInfo, ...]
    p2p: tuple[P2PInfo, ...]  # every ordered pair of distinct GPUs
    num_nvswitches: int | NA  # distinct remote switches; NA where NVML hides their bus ids
    multicast_supported: bool | NA  # reported only; never exercised
    hca_ports: tuple[HcaPort, ...]
    gpudirect_rdma: bool  # the nvidia_peermem (or older nv_peer_mem) kernel module is loaded
    nvlink_bw_mode: int | NA  # nvmlSystemGetNvlinkBwMode: 0 is full bandwidth


def _first(nvml: Any, names: tuple[str, ...], *args: Any) -> Any:
    """The answer of the first of `names` that answers (newer NVML names first)."""
    value: Any = NA()
    for name in names:
        value = nvml.query(name, *args)
        if not isinstance(value, NA):
            return value
    return value


def _get(value: Any, key: str) -> Any:
    return value if isinstance(value, NA) else value[key]


def _scaled(value: Any, factor: float) -> Any:
    return value if isinstance(value, NA) else value * factor


def _field_values(nvml: Any, device: Device, fields: list[list[int]]) -> dict[tuple[int, int], Any]:
    """nvmlDeviceGetFieldValues for [field id, scope id] pairs → (field id, scope id) → value or NA."""
    answer = nvml.query("nvmlDeviceGetFieldValues", device, fields)
    out: dict[tuple[int, int], Any] = {}
    for i, (field_id, scope_id) in enumerate(fields):
        if isinstance(answer, NA):
            out[field_id, scope_id] = answer
            continue
        entry = answer[i]
        code = entry["nvmlReturn"]
        if code != 0:
            out[field_id, scope_id] = NA(f"field {field_id} (scope {scope_id}): NVML {NVML_RETURNS.get(code, code)}")
        else:
            out[field_id, scope_id] = entry["value"][VALUE_MEMBERS[entry["valueType"]]]
    return out


def _nvlink(nvml: Any, device: Device, link: int, state: int) -> NvLinkInfo:
    version = nvml.query("nvmlDeviceGetNvLinkVersion", device, link)
    if not isinstance(version, NA):
        version = f"NVLink {NVLINK_VERSIONS[version]}" if version in NVLINK_VERSIONS else NA(f"version enum {version}")
    remote = nvml.query("nvmlDeviceGetNvLinkRemoteDeviceType", device, link)
    if not isinstance(remote, NA):
        remote = NVLINK_REMOTE_TYPES.get(remote, f"type {remote}")
    fields = [[FI_NVLINK_GET_SPEED, link]] + [[fid, link] for fid in FI_NVLINK_ERROR_DL.values()]
    if link < len(FI_NVLINK_SPEED_MBPS_L):
        fields.append([FI_NVLINK_SPEED_MBPS_L[link], 0])
    values = _field_values(nvml, device, fields)
    speed = values[FI_NVLINK_GET_SPEED, link]
    if isinstance(speed, NA) and link < len(FI_NVLINK_SPEED_MBPS_L):
        speed = values[FI_NVLINK_SPEED_MBPS_L[link], 0]
    # the per-link counters first (nvidia-smi nvlink -e reads them); the DL field values only where those fail,
    # since on Hopper the fields answer success with 0 while the counters count
    errors = {}
    for name, counter in NVLINK_ERROR_COUNTERS.items():
        errors[name] = nvml.query("nvmlDeviceGetNvLinkErrorCounter", device, link, counter)
        if isinstance(errors[name], NA) and name in FI_NVLINK_ERROR_DL:
            errors[name] = values[FI_NVLINK_ERROR_DL[name], link]
    return NvLinkInfo(
        link=link,
        state=NVLINK_STATES.get(state, f"state {state}"),
        version=version,
        remote_type=remote,
        remote_pci_bus_id=_get(nvml.query("nvmlDeviceGetNvLinkRemotePciInfo", device, link), "busId"),
        speed_MBps=speed,
        num_replay_errors=errors["replay"],
        num_recovery_errors=errors["recovery"],
        num_crc_flit_errors=errors["crc_flit"],
        num_crc_data_errors=errors["crc_data"],
    )


def _fabric(nvml: Any, device: Device) -> FabricInfo | NA:
    info = nvml.query("nvmlDeviceGetGpuFabricInfoV", device, Out("c_nvmlGpuFabricInfo_v3_t"))
    if isinstance(info, NA):
        info = nvml.query("nvmlDeviceGetGpuFabricInfoV", device, Out("c_nvmlGpuFabricInfoV_t"))
    if isinstance(info, NA):
        return info
    health: dict[str, bool | NA] = {}
    for name, shift in FABRIC_HEALTH_SHIFTS.items():
        bits = (info["healthMask"] >> shift) & 0x3 if "healthMask" in info else 0
        health[name] = {1: True, 2: False}.get(bits, NA(f"fabric health {name}: not supported"))
    summary = info.get("healthSummary", NA("fabric health summary: struct v3 not available"))
    return FabricInfo(
        state=FABRIC_STATES.get(info["state"], f"state {info['state']}"),
        status=NVML_RETURNS.get(info["status"], f"NVML return {info['status']}"),
        clique_id=info["cliqueId"],
        cluster_uuid=bytes(info["clusterUuid"]).hex(),
        health=health,
        health_summary=summary if isinstance(summary, NA) else FABRIC_HEALTH_SUMMARIES.get(summary, str(summary)),
    )


def _decode_reasons(mask: Any) -> tuple[str, ...] | NA:
    if isinstance(mask, NA):
        return mask
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    return (*names, f"unknown_{unknown:#x}") if unknown else tuple(names)


def sysfs_bus_id(bus_id: str) -> str:
    """NVML's "00000000:19:00.0" → sysfs's "0000:19:00.0"."""
    domain, rest = bus_id.lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


def _numa_node(nvml: Any, device: Device, bus_id: Any, sysfs_root: Path) -> int | NA:
    node = nvml.query("nvmlDeviceGetNumaNodeId", device)
    if not isinstance(node, NA) or isinstance(bus_id, NA):
        return node
    path = sysfs_root / "sys/bus/pci/devices" / sysfs_bus_id(bus_id) / "numa_node"
    try:
        value = int(path.read_text().strip())
    except (OSError, ValueError) as e:
        return NA(f"{node.reason}; {path}: {e}")
    return value if value >= 0 else NA(f"{node.reason}; {path}: -1 (no NUMA affinity)")


def _gpu(nvml: Any, index: int, sysfs_root: Path) -> GpuInfo:
    d = Device(index)
    pci_bus_id = _get(nvml.query("nvmlDeviceGetPciInfo", d), "busId")
    fields = _field_values(nvml, d, [[FI_NVLINK_LINK_COUNT, 0], [FI_NVSWITCH_CONNECTED_LINK_COUNT, 0]])
    nvlinks = []
    for link in range(NVLINK_MAX_LINKS):
        state = nvml.query("nvmlDeviceGetNvLinkState", d, link)
        if not isinstance(state, NA):
            nvlinks.append(_nvlink(nvml, d, link, state))
    reasons = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
    return GpuInfo(
        index=index,
        name=nvml.query("nvmlDeviceGetName", d),
        uuid=nvml.query("nvmlDeviceGetUUID", d),
        pci_bus_id=pci_bus_id,
        memory_total_bytes=_get(nvml.query("nvmlDeviceGetMemoryInfo", d), "total"),
        sm_clock_MHz=nvml.query("nvmlDeviceGetClockInfo", d, CLOCK_SM),
        sm_clock_max_MHz=nvml.query("nvmlDeviceGetMaxClockInfo", d, CLOCK_SM),
        memory_clock_MHz=nvml.query("nvmlDeviceGetClockInfo", d, CLOCK_MEM),
        memory_clock_max_MHz=nvml.query("nvmlDeviceGetMaxClockInfo", d, CLOCK_MEM),
        clock_event_reasons=_decode_reasons(_first(nvml, reasons, d)),
        power_W=_scaled(nvml.query("nvmlDeviceGetPowerUsage", d), 1e-3),  # NVML: mW
        power_limit_W=_scaled(nvml.query("nvmlDeviceGetEnforcedPowerLimit", d), 1e-3),
        temperature_C=_first(nvml, ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"), d, TEMPERATURE_GPU),
        pcie_generation=nvml.query("nvmlDeviceGetCurrPcieLinkGeneration", d),
        pcie_generation_max=nvml.query("nvmlDeviceGetMaxPcieLinkGeneration", d),
        pcie_width=nvml.query("nvmlDeviceGetCurrPcieLinkWidth", d),
        pcie_width_max=nvml.query("nvmlDeviceGetMaxPcieLinkWidth", d),
        numa_node=_numa_node(nvml, d, pci_bus_id, sysfs_root),
        num_nvlinks=fields[FI_NVLINK_LINK_COUNT, 0],
        num_nvswitch_links=fields[FI_NVSWITCH_CONNECTED_LINK_COUNT, 0],
        nvlinks=tuple(nvlinks),
        fabric=_fabric(nvml, d),
    )


def _p2p(nvml: Any, src: int, dst: int) -> P2PInfo:
    status = {}
    for name, caps in P2P_CAPS.items():
        code = nvml.query("nvmlDeviceGetP2PStatus", Device(src), Device(dst), caps)
        status[name] = code if isinstance(code, NA) else P2P_STATUS.get(code, f"status {code}")
    return P2PInfo(src, dst, **status)


def _num_nvswitches(gpus: tuple[GpuInfo, ...]) -> int | NA:
    links = [link for gpu in gpus for link in gpu.active_nvlinks]
    if not links:
        return NA("no active NVLink answered")
    switch_ids = [link.remote_pci_bus_id for link in links if link.remote_type == "SWITCH"]
    if any(isinstance(bus_id, NA) for bus_id in switch_ids):
        return NA("a switch link's remote PCI bus id is unavailable")
    if any(bus_id.upper().startswith(HIDDEN_BUS_ID_DOMAIN) for bus_id in switch_ids):
        return NA("NVML hides the switches' PCI bus ids (FFFFFFFF:FF:FF.0): switch count unknown")
    return len(set(switch_ids))


def _read(path: Path) -> str | NA:
    try:
        return path.read_text().strip()
    except OSError as e:
        return NA(f"{path}: {e.strerror}")


def _hca_ports(sysfs_root: Path) -> tuple[HcaPort, ...]:
    ports = []
    for port_dir in sorted((sysfs_root / "sys/class/infiniband").glob("*/ports/*")):
        rate_text = _read(port_dir / "rate")
        rate = NA(f"rate: {rate_text!r} unparsed")
        if not isinstance(rate_text, NA) and (m := re.match(r"\s*([\d.]+)\s*Gb/sec", rate_text)):
            rate = float(m.group(1))
        state = _read(port_dir / "state")  # "4: ACTIVE"
        ports.append(
            HcaPort(
                device=port_dir.parent.parent.name,
                port=int(port_dir.name),
                rate_Gbps=rate,
                rate_text=rate_text,
                state=state if isinstance(state, NA) else state.split(":")[-1].strip(),
                link_layer=_read(port_dir / "link_layer"),
            )
        )
    return tuple(ports)


def discover(nvml: Any, *, sysfs_root: Path = Path("/")) -> Discovery:
    """Everything NVML (through `nvml`, a backend of nvml.py) and sysfs (under `sysfs_root`) say about this node."""
    num_gpus = nvml.query("nvmlDeviceGetCount")
    indices = range(0 if isinstance(num_gpus, NA) else num_gpus)
    gpus = tuple(_gpu(nvml, i, sysfs_root) for i in indices)
    modules = sysfs_root / "sys/module"
    return Discovery(
        driver_version=nvml.query("nvmlSystemGetDriverVersion"),
        cuda_driver_version=nvml.query("nvmlSystemGetCudaDriverVersion"),
        nvml_version=nvml.query("nvmlSystemGetNVMLVersion"),
        num_gpus=num_gpus,
        gpus=gpus,
        p2p=tuple(_p2p(nvml, i, j) for i in indices for j in indices if i != j),
        num_nvswitches=_num_nvswitches(gpus),
        multicast_supported=MULTICAST_NA,
        hca_ports=_hca_ports(sysfs_root),
        gpudirect_rdma=(modules / "nvidia_peermem").exists() or (modules / "nv_peer_mem").exists(),
        nvlink_bw_mode=nvml.query("nvmlSystemGetNvlinkBwMode"),
    )


def _known(values: list[Any]) -> list[Any]:
    return [v for v in values if not isinstance(v, NA)]


def _link_flags(gpu: GpuInfo) -> list[str]:
    flags = []
    active = gpu.active_nvlinks
    down = [link for link in gpu.nvlinks if not link.active]
    if active and down:
        ids = ", ".join(str(link.link) for link in down)
        flags.append(f"GPU{gpu.index}: NVLink {ids} down while {len(active)} sibling links are up")
    speeds = _known([link.speed_MBps for link in active])
    for link in active:
        if not isinstance(link.speed_MBps, NA) and speeds and link.speed_MBps < max(speeds):
            flags.append(
                f"GPU{gpu.index}: NVLink {link.link} at {link.speed_MBps:g} MB/s, slower than its siblings "
                f"({max(speeds):g} MB/s)"
            )
    versions = _known([link.version for link in active])
    newest = max(versions, key=lambda v: tuple(map(int, v.split()[-1].split(".")))) if versions else None
    for link in active:
        if not isinstance(link.version, NA) and link.version != newest:
            flags.append(f"GPU{gpu.index}: NVLink {link.link} runs {link.version}, its siblings {newest}")
    for name in NVLINK_ERROR_COUNTERS:  # one line per GPU and counter: cumulative counts since the driver loaded
        counts = {link.link: link.errors[name] for link in gpu.nvlinks if name in link.errors}
        if counts:
            worst = max(counts, key=counts.__getitem__)
            flags.append(
                f"GPU{gpu.index}: NVLink {name.replace('_', ' ')} error counter non-zero on {len(counts)} of "
                f"{len(gpu.nvlinks)} links, {sum(counts.values())} in all (most: link {worst}, {counts[worst]}; "
                f"cumulative since the driver loaded)"
            )
    return flags


def _gpu_flags(gpu: GpuInfo) -> list[str]:
    flags = _link_flags(gpu)
    gen, gen_max = gpu.pcie_generation, gpu.pcie_generation_max
    if not isinstance(gen, NA) and not isinstance(gen_max, NA) and gen < gen_max:
        flags.append(
            f"GPU{gpu.index}: PCIe gen {gen} below max gen {gen_max} (idle GPUs downshift; re-check under load)"
        )
    width, width_max = gpu.pcie_width, gpu.pcie_width_max
    if not isinstance(width, NA) and not isinstance(width_max, NA) and width < width_max:
        flags.append(f"GPU{gpu.index}: PCIe width x{width} below max x{width_max}")
    if not isinstance(gpu.clock_event_reasons, NA):
        held = [r for r in gpu.clock_event_reasons if r not in BENIGN_CLOCK_EVENT_REASONS]
        if held:
            flags.append(f"GPU{gpu.index}: clocks held back by {', '.join(held)}")
    if not isinstance(gpu.fabric, NA):
        bad = [name for name, value in gpu.fabric.health.items() if value is True]
        if bad:
            flags.append(f"GPU{gpu.index}: NVLink fabric health: {', '.join(bad).replace('_', ' ')}")
    return flags


def _p2p_flags(discovery: Discovery) -> list[str]:
    flags = []
    nvlinked = {gpu.index for gpu in discovery.gpus if gpu.active_nvlinks}
    for pair in discovery.p2p:
        checks = ["read", "write"] + (["nvlink"] if {pair.src, pair.dst} <= nvlinked else [])
        for name in checks:
            status = getattr(pair, name)
            if not isinstance(status, NA) and status != "OK":
                flags.append(f"GPU{pair.src} -> GPU{pair.dst}: P2P {name} {status}")
    return flags


def health(discovery: Discovery) -> list[str]:
    """One line per thing worth a look before trusting measurements on this node; [] when all looks right."""
    flags = [flag for gpu in discovery.gpus for flag in _gpu_flags(gpu)] + _p2p_flags(discovery)
    if not isinstance(discovery.nvlink_bw_mode, NA) and discovery.nvlink_bw_mode != 0:
        flags.append(f"NVLink bandwidth mode {discovery.nvlink_bw_mode} (0 is full): the links run reduced")
    counts = {gpu.index: len(gpu.nvlinks) for gpu in discovery.gpus}  # down links are flagged per GPU above
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"GPU{i} {n}" for i, n in counts.items())
        flags.append(f"GPUs report different numbers of NVLinks: {listed}")
    names = {gpu.index: gpu.name for gpu in discovery.gpus if not isinstance(gpu.name, NA)}
    if len(set(names.values())) > 1:
        flags.append(f"GPUs differ: {', '.join(f'GPU{i} {name}' for i, name in names.items())}")
    return flags
