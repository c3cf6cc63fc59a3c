"""Embedded topology presets, every number cited: datasheets for nominal figures, published runs for achieved ones.

`PRESETS` maps a name to a function building the Topology; `preset(name)` builds one, `resolve(text)` takes
a preset name or a JSON file path. `--nodes N` joins N copies by their NICs (default NDR 400 Gb/s per GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pkroof.rooflines import Collective, bus_bandwidth_factor

from .files import load
from .model import GPU, NIC, MechanismSpec, ScaleUp, Source, Topology

GB = 1e9
GiB = 2**30
TFLOPS = 1e12

SOURCES: dict[str, Source] = {
    "a100-datasheet": Source(
        "nominal",
        "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM column; dense rates (the sparse ones are 2x)",
    ),
    "ampere-whitepaper": Source(
        "nominal",
        "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs, "
        "12 NVLink 3.0 links x 25 GB/s per direction, NVSwitch gen2 (6 per DGX A100)",
    ),
    "dgx-a100-guide": Source(
        "nominal",
        "NVIDIA DGX A100 User Guide / datasheet: 8x A100 80GB, 6 NVSwitch, "
        "8x ConnectX-6 HDR 200 Gb/s InfiniBand for compute",
    ),
    "h100-datasheet": Source(
        "nominal", "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column; dense rates (the sparse ones are 2x)"
    ),
    "hopper-whitepaper": Source(
        "nominal",
        "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): H100 SXM5 "
        "132 SMs, 18 NVLink 4.0 links, 900 GB/s total = 450 GB/s per direction, "
        "NVSwitch gen3 with SHARP in-network reduction (NVLS)",
    ),
    "hgx-h100": Source(
        "nominal",
        "NVIDIA HGX H100 8-GPU platform: 4 third-generation NVSwitch chips; DGX H100 "
        "datasheet: 8x ConnectX-7 NDR 400 Gb/s for compute",
    ),
    "h200-datasheet": Source(
        "nominal",
        "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column: 141 GB "
        "HBM3e at 4.8 TB/s, same tensor rates as H100 SXM; NVLink 900 GB/s",
    ),
    "b200-datasheet": Source(
        "nominal",
        "NVIDIA DGX B200 / HGX B200 datasheet (2024), per GPU: 180 GB HBM3e at "
        "8 TB/s, NVLink 5 1.8 TB/s total; dense rates are half the sparse ones",
    ),
    "blackwell-whitepaper": Source(
        "nominal",
        "NVIDIA Blackwell architecture technical brief (2024): 18 NVLink 5 "
        "links x 50 GB/s per direction; NVLink Switch with SHARP v4",
    ),
    "gb200-nvl72": Source(
        "nominal",
        "NVIDIA GB200 NVL72 datasheet (2024): 72 Blackwell GPUs in one NVLink domain, "
        "130 TB/s NVLink total, 13.4 TB HBM3e at 576 TB/s; per GPU by dividing by 72; "
        "dense rates are half the sparse ones",
    ),
    "l40s-datasheet": Source(
        "nominal",
        "NVIDIA L40S datasheet (2023): 142 SMs, 48 GB GDDR6 at 864 GB/s, "
        "PCIe Gen4 x16, no NVLink; dense rates are half the sparse ones",
    ),
    "pcie-spec": Source(
        "nominal", "PCI Express Base Specification 4.0: 16 GT/s x16 with 128b/130b = 31.5 GB/s per direction"
    ),
    "pk-2025": Source(
        "measured",
        "Sul et al., ParallelKittens: Systematic and Practical Simplification of "
        "Multi-GPU AI Kernels, arXiv:2511.13940 (2025), sec. 3: 1 GB transfers on 8xH100, "
        "copy engine ~369 GB/s, TMA ~350, SM ld/st ~343 of 450; TMA saturates NVLink "
        "with ~15 SMs, ld/st needs ~76",
    ),
    "pk-2025-b200": Source(
        "measured",
        "Sul et al., ParallelKittens, arXiv:2511.13940 (2025), 1 GB transfers on "
        "8xB200: copy engine ~726 GB/s, TMA ~669, SM ld/st ~628 of 900; TMA saturates "
        "NVLink with ~15 of 148 SMs",
    ),
    "derived": Source(
        "nominal",
        "derived by pkroof from the other numbers of this preset (per-CTA bandwidth = "
        "peak / SMs to saturate), or carried over from another preset of the same link "
        "generation, as the mechanism's note says",
    ),
    "lat-h200x2": Source(
        "measured",
        "pkroof, 2×H200 node (NVLink 4 through NVSwitch), CUDA-graph-timed small "
        "transfers, 2026-11-30: benchmarks/2026-11-30-latency-h200x2.md; carried over "
        "to other fabrics where no published latency exists, as the note says",
    ),
    "nccl-tuning": Source(
        "nominal",
        "NCCL's own cost model, src/graph/tuning.cc (NVIDIA/nccl): ring LL protocol "
        "latency per step 0.47 µs over NVLink, 1.0 µs over PCIe, 2.7 µs over the network",
    ),
    "nccl-channels": Source(
        "nominal",
        "assumption: NCCL runs one CTA per channel and uses up to 32 channels "
        "(its default NCCL_MAX_NCHANNELS) on NVLink nodes; it often uses fewer",
    ),
    "nccl-ring-h100": Source(
        "measured",
        "NVIDIA/nccl issue 1455: all_reduce_perf with NCCL_ALGO=RING on 2-8 "
        "H100, 2-4 GB: busbw 365-370 GB/s; NVIDIA/nccl-tests issue 212 (NCCL "
        "maintainer): ~370 GB/s, NVLink 450 GB/s line rate less ~20% protocol",
    ),
    "nccl-nvls-h100": Source(
        "measured",
        "NVIDIA/nccl-tests issue 212 (NCCL maintainer) and GTC S62129: NVLS "
        "all-reduce on 8xH100 reaches ~480 GB/s busbw",
    ),
    "nccl-nvls-h200": Source(
        "measured",
        "NVIDIA/nccl-tests issue 272: all_reduce_perf on 8xH200, NCCL 2.20.3, peak busbw 475 GB/s (NVLS on by default)",
    ),
    "nccl-b200": Source(
        "measured",
        "NVIDIA/nccl issue 1807: all_reduce_perf on 8xB200, busbw 830+ GB/s (NVLS "
        "on by default); NCCL v2.27.7 src/graph/topo.h models SM100 NVLink at "
        "40.1 GB/s per link, 18 x 40.1 = 721.8 GB/s for rings",
    ),
    "nccl-nvl72": Source(
        "measured",
        "coreweave/nccl-tests pull request 43: all_reduce_perf on a 72-GPU GB200 NVL72, busbw 835-847 GB/s at 4-8 GB",
    ),
    "nccl-a100": Source(
        "measured", "NVIDIA/nccl-tests issue 149 (NCCL maintainer): ~230 GB/s all-reduce busbw on 8xA100 NVSwitch"
    ),
    "a100-link-eff": Source(
        "nominal",
        "NVIDIA/nccl-tests issue 149 (NCCL maintainer): each NVLink 3 link carries "
        "~20 GB/s of payload per direction with 128 B writes, 12 links = 240 GB/s",
    ),
    "pcie-analog": Source(
        "measured",
        "NVIDIA/nvbandwidth issue 50: device_to_device_memcpy_read_ce between RTX "
        "A6000s on PCIe Gen4 x16, 21.8-26.35 GB/s per pair (not L40S: no L40S "
        "figure was found; same link)",
    ),
    "ib-latency-assumed": Source(
        "nominal",
        "assumption, not a measurement: 3 µs GPU-to-GPU one way through one "
        "InfiniBand switch level with GPUDirect RDMA",
    ),
    "cx6-hdr": Source(
        "nominal",
        "NVIDIA DGX A100 System Architecture whitepaper (2020): 8x single-port "
        "ConnectX-6 VPI HDR InfiniBand 200 Gb/s for compute",
    ),
    "cx7-ndr": Source("nominal", "NVIDIA ConnectX-7 adapter datasheet: InfiniBand NDR, 400 Gb/s per port"),
}


def _topology(**fields: object) -> Topology:
    """A Topology whose source catalogue holds exactly the sources its records cite."""
    records = [fields["gpu"], fields["scaleup"], *fields["mechanisms"].values(), fields["nic"]]
    cited = sorted({i for r in records if r is not None for i in r.sources.values()})
    return Topology(**fields, sources={i: SOURCES[i] for i in cited})


def _mech(
    latency_s: float,
    peak_Bps: float,
    per_cta_Bps: float | None,
    src: dict[str, str],
    note: str = "",
    *,
    ctas_default: int = 0,
    step_latency_s: float | None = None,
) -> MechanismSpec:
    return MechanismSpec(True, latency_s, peak_Bps, per_cta_Bps, ctas_default, note, step_latency_s, src)


def _unavailable(note: str) -> MechanismSpec:
    return MechanismSpec(False, 0.0, 0.0, None, 0, note)


def _all(source: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, source)


# Latencies measured on the 2×H200 node (benchmarks/2026-11-30-latency-h200x2.md, medians of runs r1/r2):
# copy engine: one 4 B pull per copy inside a CUDA graph, 2.44/2.62 µs; SM mechanisms: a 4 KiB message stored
# to the peer plus its flag, one way, 2.57/2.55 µs, then one flag (1.23 µs) per further dependent step;
# NCCL: an 8 B all-reduce in a graph, 8.6/8.4 µs for its 2 ring steps, less NCCL's 0.47 µs per NVLink step.
CE_LATENCY_S = 2.5e-6
SM_LATENCY_S, SM_STEP_S = 2.56e-6, 1.23e-6
NCCL_LATENCY_S = 8.5e-6 - 0.47e-6
NCCL_STEP_S = {"nvlink": 0.47e-6, "pcie": 1.0e-6}
NCCL_CHANNELS = 32


def _nvlink(generation: str, links: int, per_link_GBps: float, switches: int, multicast: bool, src: str) -> ScaleUp:
    return ScaleUp(
        "nvswitch",
        generation,
        links,
        per_link_GBps * GB,
        switches,
        multicast,
        _all(src, "links_per_gpu", "link_bandwidth_Bps", "switches_per_node"),
    )


def _nic(model: str, gbit: float, count: int, src: str) -> NIC:
    return NIC(
        "infiniband",
        model,
        count,
        gbit * 1e9 / 8,
        3e-6,
        True,
        True,
        _all(src, "count_per_node", "rate_Bps") | _all("ib-latency-assumed", "latency_s"),
    )


def _sm_mech(rate_Bps: float, ctas: float, src: dict[str, str], note: str) -> MechanismSpec:
    """A device-initiated mechanism saturating with `ctas` CTAs, with the measured SM latencies."""
    src = src | _all("lat-h200x2", "latency_s", "step_latency_s") | _all("derived", "per_cta_bandwidth_Bps")
    return _mech(SM_LATENCY_S, rate_Bps, rate_Bps / ctas, src, note, step_latency_s=SM_STEP_S)


def _device_mechanisms(
    *,
    ce: float,
    tma: float | None,
    ldst: float,
    ldst_ctas: int,
    tma_ctas: int,
    multimem: float | None,
    nccl: float,
    rate_src: str,
    multimem_src: str,
    nccl_src: str,
    fabric: str,
    carried: str = "",
) -> dict[str, MechanismSpec]:
    """The six mechanisms from achieved rates: per-CTA bandwidth = rate / SMs to saturate."""
    rate = _all(rate_src, "peak_bandwidth_Bps")
    suffix = f"; {carried}" if carried else ""
    ldst_note = f"SM ld/st rate; saturates with {ldst_ctas} SMs" + suffix
    nvls_note = (
        "link rate of NCCL's NVLS all-reduce: busbw / (2(n-1)/n), as in-network all-reduce moves S per rank; "
        "multimem.ld_reduce is an SM load, so CTAs and latency as sm-load (not run: multicast stays off)" + suffix
    )
    nccl_src_map = (
        _all("lat-h200x2", "latency_s")
        | _all(nccl_src, "peak_bandwidth_Bps")
        | _all("nccl-channels", "per_cta_bandwidth_Bps", "num_ctas_default")
        | _all("nccl-tuning", "step_latency_s")
    )
    return {
        "copy-engine": _mech(
            CE_LATENCY_S, ce, None, _all("lat-h200x2", "latency_s") | rate, "host-issued peer copies; no SMs" + suffix
        ),
        "sm-load": _sm_mech(ldst, ldst_ctas, rate, ldst_note),
        "sm-store": _sm_mech(ldst, ldst_ctas, rate, ldst_note),
        "tma": _unavailable("no TMA before Hopper")
        if tma is None
        else _sm_mech(tma, tma_ctas, rate, f"saturates with {tma_ctas} SMs; latency as the SM store's" + suffix),
        "multimem": _unavailable("the switches do no in-network reduction (no NVLS)")
        if multimem is None
        else _sm_mech(multimem, ldst_ctas * multimem / ldst, _all(multimem_src, "peak_bandwidth_Bps"), nvls_note),
        "nccl": _mech(
            NCCL_LATENCY_S,
            nccl,
            nccl / NCCL_CHANNELS,
            nccl_src_map,
            "ring without NVLS: bus bandwidth = link rate",
            ctas_default=NCCL_CHANNELS,
            step_latency_s=NCCL_STEP_S[fabric],
        ),
    }


def _nvls_link_rate(busbw_GBps: float, n: int) -> float:
    """NVLS all-reduce moves S per rank each way, so its link rate is algbw = busbw / nccl-tests' factor (2(n−1)/n)."""
    return busbw_GBps * GB / bus_bandwidth_factor(Collective.ALL_REDUCE, n)


def _hopper(name: str, description: str, gpu: GPU, nvls: str, nvls_busbw: float, carried: str = "") -> Topology:
    mechanisms = _device_mechanisms(
        ce=368.82 * GB,
        tma=350.01 * GB,
        ldst=342.68 * GB,
        ldst_ctas=76,
        tma_ctas=15,
        multimem=_nvls_link_rate(nvls_busbw, 8),
        nccl=368.0 * GB,
        rate_src="pk-2025",
        multimem_src=nvls,
        nccl_src="nccl-ring-h100",
        fabric="nvlink",
        carried=carried,
    )
    return _topology(
        name=name,
        description=description,
        nodes=1,
        gpus_per_node=8,
        gpu=gpu,
        scaleup=_nvlink("NVLink 4.0", 18, 25.0, 4, True, "hopper-whitepaper"),
        mechanisms=mechanisms,
        nic=_nic("ConnectX-7", 400, 8, "hgx-h100"),
    )


HOPPER_FLOPS = {
    "bf16": 989.4 * TFLOPS,
    "fp16": 989.4 * TFLOPS,
    "fp8": 1978.9 * TFLOPS,
    "tf32": 494.7 * TFLOPS,
    "fp32": 67.0 * TFLOPS,
}


def _hgx_h100_8() -> Topology:
    gpu = GPU(
        "NVIDIA H100 80GB HBM3",
        "hopper",
        132,
        80 * GiB,
        3.35e12,
        dict(HOPPER_FLOPS),
        _all("h100-datasheet", "hbm_capacity_bytes", "hbm_bandwidth_Bps", "peak_flops")
        | _all("hopper-whitepaper", "sm_count"),
    )
    return _hopper(
        "hgx-h100-8",
        "8x H100 SXM5, NVLink 4 through 4 NVSwitch gen3 (NVLS), 8x ConnectX-7 NDR",
        gpu,
        "nccl-nvls-h100",
        480.0,
    )


def _hgx_h200_8() -> Topology:
    gpu = GPU(
        "NVIDIA H200",
        "hopper",
        132,
        141 * 10**9,
        4.8e12,
        dict(HOPPER_FLOPS),
        _all("h200-datasheet", "hbm_capacity_bytes", "hbm_bandwidth_Bps", "peak_flops")
        | _all("hopper-whitepaper", "sm_count"),
    )
    return _hopper(
        "hgx-h200-8",
        "8x H200 SXM, NVLink 4 through 4 NVSwitch gen3 (NVLS), 8x ConnectX-7 NDR",
        gpu,
        "nccl-nvls-h200",
        475.0,
        carried="rates carried over from H100 (same NVLink 4 and NVSwitch gen3)",
    )


def _blackwell_mechanisms(nvls: str, nvls_busbw: float, n: int) -> dict[str, MechanismSpec]:
    return _device_mechanisms(
        ce=726.13 * GB,
        tma=669.12 * GB,
        ldst=628.35 * GB,
        ldst_ctas=76,
        tma_ctas=15,
        multimem=_nvls_link_rate(nvls_busbw, n),
        nccl=18 * 40.1 * GB,
        rate_src="pk-2025-b200",
        multimem_src=nvls,
        nccl_src="nccl-b200",
        fabric="nvlink",
        carried="ld/st SMs to saturate carried over from H100 (76); latencies from the NVLink 4 measurement",
    )


def _hgx_b200_8() -> Topology:
    gpu = GPU(
        "NVIDIA B200",
        "blackwell",
        148,
        180 * 10**9,
        8e12,
        {
            "bf16": 2250 * TFLOPS,
            "fp16": 2250 * TFLOPS,
            "fp8": 4500 * TFLOPS,
            "tf32": 1100 * TFLOPS,
            "fp32": 80 * TFLOPS,
        },
        _all("b200-datasheet", "hbm_capacity_bytes", "hbm_bandwidth_Bps", "peak_flops")
        | _all("pk-2025-b200", "sm_count"),
    )
    return _topology(
        name="hgx-b200-8",
        description="8x B200, NVLink 5 through 2 NVLink switch chips (NVLS), 8x ConnectX-7 NDR",
        nodes=1,
        gpus_per_node=8,
        gpu=gpu,
        scaleup=_nvlink("NVLink 5.0", 18, 50.0, 2, True, "blackwell-whitepaper"),
        mechanisms=_blackwell_mechanisms("nccl-b200", 830.0, 8),
        nic=_nic("ConnectX-7", 400, 8, "b200-datasheet"),
    )


def _gb200_nvl72() -> Topology:
    gpu = GPU(
        "NVIDIA GB200",
        "blackwell",
        148,
        186 * 10**9,
        8e12,
        {
            "bf16": 2500 * TFLOPS,
            "fp16": 2500 * TFLOPS,
            "fp8": 5000 * TFLOPS,
            "tf32": 1250 * TFLOPS,
            "fp32": 80 * TFLOPS,
        },
        _all("gb200-nvl72", "hbm_capacity_bytes", "hbm_bandwidth_Bps", "peak_flops") | _all("derived", "sm_count"),
    )
    return _topology(
        name="gb200-nvl72",
        description="GB200 NVL72: 72 Blackwell GPUs in one NVLink 5 domain, 18 switch chips",
        nodes=1,
        gpus_per_node=72,
        gpu=gpu,
        scaleup=_nvlink("NVLink 5.0", 18, 50.0, 18, True, "gb200-nvl72"),
        mechanisms=_blackwell_mechanisms("nccl-nvl72", 847.0, 72),
        nic=None,
    )


def _dgx_a100_8() -> Topology:
    gpu = GPU(
        "NVIDIA A100-SXM4-80GB",
        "ampere",
        108,
        80 * GiB,
        2.039e12,
        {"bf16": 312 * TFLOPS, "fp16": 312 * TFLOPS, "tf32": 156 * TFLOPS, "fp32": 19.5 * TFLOPS},
        _all("a100-datasheet", "hbm_capacity_bytes", "hbm_bandwidth_Bps", "peak_flops")
        | _all("ampere-whitepaper", "sm_count"),
    )
    mechanisms = _device_mechanisms(
        ce=240 * GB,
        tma=None,
        ldst=240 * GB,
        ldst_ctas=76,
        tma_ctas=0,
        multimem=None,
        nccl=230 * GB,
        rate_src="a100-link-eff",
        multimem_src="",
        nccl_src="nccl-a100",
        fabric="nvlink",
        carried="12 links x ~20 GB/s effective; ld/st SMs to saturate carried over from H100; latencies from NVLink 4",
    )
    return _topology(
        name="dgx-a100-8",
        description="8x A100 SXM4 80GB, NVLink 3 through 6 NVSwitch gen2 (no NVLS), 8x CX-6 HDR",
        nodes=1,
        gpus_per_node=8,
        gpu=gpu,
        scaleup=_nvlink("NVLink 3.0", 12, 25.0, 6, False, "ampere-whitepaper"),
        mechanisms=mechanisms,
        nic=_nic("ConnectX-6", 200, 8, "cx6-hdr"),
    )


def _pcie_l40s_8() -> Topology:
    gpu = GPU(
        "NVIDIA L40S",
        "ada",
        142,
        48 * GiB,
        864e9,
        {
            "bf16": 362.05 * TFLOPS,
            "fp16": 362.05 * TFLOPS,
            "fp8": 733 * TFLOPS,
            "tf32": 183 * TFLOPS,
            "fp32": 91.6 * TFLOPS,
        },
        _all("l40s-datasheet", "sm_count", "hbm_capacity_bytes", "hbm_bandwidth_Bps", "peak_flops"),
    )
    mechanisms = _device_mechanisms(
        ce=24 * GB,
        tma=None,
        ldst=24 * GB,
        ldst_ctas=16,
        tma_ctas=0,
        multimem=None,
        nccl=24 * GB,
        rate_src="pcie-analog",
        multimem_src="",
        nccl_src="pcie-analog",
        fabric="pcie",
        carried="PCIe Gen4 rate measured between RTX A6000s; SM ld/st assumed to match it with 16 SMs; "
        "latencies from the NVLink 4 measurement (PCIe is slower)",
    )
    return _topology(
        name="pcie-l40s-8",
        description="8x L40S on PCIe 4.0 x16, no NVLink, no NICs (--nodes adds NDR 400 per GPU)",
        nodes=1,
        gpus_per_node=8,
        gpu=gpu,
        scaleup=ScaleUp(
            "pcie",
            "PCIe 4.0 x16",
            1,
            31.5 * GB,
            0,
            False,
            _all("pcie-spec", "links_per_gpu", "link_bandwidth_Bps", "switches_per_node"),
        ),
        mechanisms=mechanisms,
        nic=None,
    )


def _h200x2() -> Topology:
    """The 2×H200 test node as `pkroof probe` measured it (topology/data/h200x2.json; benchmarks/ has the runs)."""
    return load(Path(__file__).parent / "data" / "h200x2.json")


PRESETS: dict[str, Callable[[], Topology]] = {
    "h200x2": _h200x2,
    "hgx-h100-8": _hgx_h100_8,
    "hgx-h200-8": _hgx_h200_8,
    "hgx-b200-8": _hgx_b200_8,
    "gb200-nvl72": _gb200_nvl72,
    "dgx-a100-8": _dgx_a100_8,
    "pcie-l40s-8": _pcie_l40s_8,
}


def preset(name: str) -> Topology:
    if name not in PRESETS:
        raise ValueError(f"unknown topology {name!r} (presets: {', '.join(PRESETS)}; or a JSON file path)")
    return PRESETS[name]()


def resolve(name_or_path: str, *, nodes: int | None = None) -> Topology:
    """A preset by name, else a topology JSON file; then `nodes` copies of it if asked."""
    looks_like_file = name_or_path.endswith(".json") or "/" in name_or_path or Path(name_or_path).is_file()
    topology = load(name_or_path) if looks_like_file else preset(name_or_path)
    if nodes is not None:
        if nodes < 1:
            raise ValueError(f"--nodes must be at least 1, got {nodes}")
        topology = topology.with_nodes(nodes)
    return topology
