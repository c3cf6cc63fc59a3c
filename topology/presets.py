"""Embedded topology presets, every number cited: datasheets for nominal figures, published runs for measured ones,
and, where nothing was published for a machine, the nearest measurement carried over and labelled so.

The roof is a bound, so each peak is the most favourable figure measured for the machine's link or GPU (capped by
the physical limit: the raw link rate, the datasheet peak); predictions take typical figures (rates with both
directions busy, a matmul's achieved rate, NCCL as it runs by default). The published runs themselves, the ones
that set these numbers and the ones that check them, are in tests/data/published/measurements.csv (`use` = set
or check; its README says which rows tuned the NCCL lines and which are held out).

`PRESETS` maps a name to a function building the Topology; `preset(name)` builds one, `resolve(text)` takes
a preset name or a JSON file path. `--nodes N` joins N copies by their NICs (default NDR 400 Gb/s per GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

from pkroof.rooflines.nccl import NcclLine, NcclTuning

from .files import load
from .model import GPU, NIC, MechanismSpec, NcclSpec, ScaleUp, Source, Topology

GB = 1e9
GiB = 2**30
TFLOPS = 1e12
H200X2 = Path(__file__).parent / "data" / "h200x2.json"
TABLE = "tests/data/published/measurements.csv"
STAS = "github.com/stas00/ml-engineering"

SOURCES: dict[str, Source] = {
    "a100-datasheet": Source(
        "nominal",
        "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM column; dense rates (the sparse ones are 2x)",
        date="2021",
    ),
    "ampere-whitepaper": Source(
        "nominal",
        "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs, "
        "12 NVLink 3.0 links x 25 GB/s per direction, NVSwitch gen2 (6 per DGX A100)",
        date="2020",
    ),
    "h100-datasheet": Source(
        "nominal",
        "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column; dense rates (the sparse ones are 2x)",
        date="2023",
    ),
    "hopper-whitepaper": Source(
        "nominal",
        "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): H100 SXM5 "
        "132 SMs, 18 NVLink 4.0 links, 900 GB/s total = 450 GB/s per direction, "
        "NVSwitch gen3 with SHARP in-network reduction (NVLS)",
        date="2022",
    ),
    "hgx-h100": Source(
        "nominal",
        "NVIDIA HGX H100 8-GPU platform: 4 third-generation NVSwitch chips; DGX H100 "
        "datasheet: 8x ConnectX-7 NDR 400 Gb/s for compute",
        date="2023",
    ),
    "h200-datasheet": Source(
        "nominal",
        "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column: 141 GB "
        "HBM3e at 4.8 TB/s, same tensor rates as H100 SXM; NVLink 900 GB/s",
        date="2024",
    ),
    "b200-datasheet": Source(
        "nominal",
        "NVIDIA DGX B200 / HGX B200 datasheet (2024), per GPU: 180 GB HBM3e at "
        "8 TB/s, NVLink 5 1.8 TB/s total; dense rates are half the sparse ones",
        date="2024",
    ),
    "blackwell-whitepaper": Source(
        "nominal",
        "NVIDIA Blackwell architecture technical brief (2024): 148 SMs per B200, 18 NVLink 5 "
        "links x 50 GB/s per direction; NVLink Switch with SHARP v4",
        date="2024",
    ),
    "gb200-nvl72": Source(
        "nominal",
        "NVIDIA GB200 NVL72 datasheet (2024): 72 Blackwell GPUs in one NVLink domain, "
        "130 TB/s NVLink total, 13.4 TB HBM3e at 576 TB/s; per GPU by dividing by 72; "
        "dense rates are half the sparse ones (OCI's quick start lists bf16 2450, stas00's table 2500: the higher, "
        "as a roof)",
        date="2024",
    ),
    "gb200-nvl576": Source(
        "nominal",
        "NVIDIA's GTC 2024 Blackwell announcement (2024-03-18, as reproduced by AMAX; the newsroom page was not in the "
        "search index): fifth-generation NVLink 'delivers 1.8TB/s bidirectional throughput per GPU' for communication "
        "'among up to 576 GPUs'; NVIDIA's NVLink page: the NVLink Switch chips give 'all-to-all GPU communication at "
        "full NVLink speed within a single rack and between racks', each with SHARP engines for in-network reduction "
        "and multicast; NVIDIA Mission Control's NVLink chapter: 'up to 576 GPUs in a single NVLink domain'. Per GPU "
        "18 links x 50 GB/s per direction (1.8 TB/s both ways / 2): the announced figure, not less, as a roof. Switch "
        "chips: the 8 racks' 18 each (GB200 NVL72 datasheet); the second tier's count is not published. No "
        "measurement of a 576-GPU NVLink domain was found published; in 2024-05 NCCL's maintainers said no "
        "multi-level NVLink switch product was available (NVIDIA/nccl#1286)",
        url="https://amax.com/nvidia-blackwell; https://www.nvidia.com/en-au/data-center/nvlink/; "
        "https://docs.nvidia.com/base-command-manager/product-manuals/nvidia-mission-control/nvlinkinfo; "
        "https://github.com/NVIDIA/nccl/issues/1286",
        date="2024-03-18",
    ),
    "nvl576-latency": Source(
        "carried",
        "the GB200 NVL72 preset's latencies, themselves the 2x H200 node's probe (the h200x2-probe source; no "
        "Blackwell latency was found published): a path between racks of a 576-GPU domain crosses a second tier of "
        "NVLink switches as well as the rack's, so it takes no less than a path inside one NVL72; no NVL576 latency "
        "is published, so the rack's figures stand as a floor",
        url="topology/data/h200x2.json",
        date="2026-11-30",
        software="driver 580.159.04, torch 2.11.0+cu130, NCCL 2.28.9, Triton 3.6.0",
    ),
    "l40s-datasheet": Source(
        "nominal",
        "NVIDIA L40S datasheet (2023): 142 SMs, 48 GB GDDR6 at 864 GB/s, "
        "PCIe Gen4 x16, no NVLink; dense rates are half the sparse ones",
        date="2023",
    ),
    "pcie-spec": Source(
        "nominal", "PCI Express Base Specification 4.0: 16 GT/s x16 with 128b/130b = 31.5 GB/s per direction"
    ),
    "switch-port": Source(
        "nominal",
        "the NVSwitch ports run at the NVLink rate and the switches reduce and multicast in the network (NVIDIA, "
        "'Upgrading Multi-GPU Interconnectivity with the Third-Generation NVIDIA NVSwitch', 2022; Blackwell "
        "brief, 2024): in-network all-reduce at the link rate, each rank sending and receiving the size once, is "
        "the physical bound; no multimem kernel's rate was found published, so the roof takes that limit",
        url="https://developer.nvidia.com/blog/upgrading-multi-gpu-interconnectivity-with-the-third-generation-nvidia-nvswitch/",
        date="2022-08",
    ),
    "nvbw-h100": Source(
        "measured",
        "nvbandwidth on 8x H100 80GB HBM3 SXM (Xeon 8462Y+, acceptance test): device_to_device_memcpy_write_ce "
        "397.44-397.52 GB/s, _read_ce 395.05-395.25 GB/s per pair one way; p2pBandwidthLatencyTest bidirectional "
        "P2P 737.95-775.34 GB/s, the sum of both directions",
        url="GitHub-hosted test table (search index file 62193952648; the index does not name its repository)",
        date="2026-07-22",
        software="nvbandwidth v0.10.0, CUDA 13.2, driver 595.71.05; CUDA samples p2pBandwidthLatencyTest",
    ),
    "nvbw-h100-carried": Source(
        "carried",
        "measured on 8x H100 80GB HBM3 SXM (the nvbw-h100 source: nvbandwidth write CE 397.44-397.52 GB/s one way, "
        "p2pBandwidthLatencyTest bidirectional up to 775.34 GB/s summed): the same NVLink 4 and NVSwitch gen3 as "
        "H200; no H200 nvbandwidth or p2pBandwidthLatencyTest run was found (Azure's 671 GB/s 'Device to Device "
        "read' is a two-direction sum, above the 450 GB/s one-way link)",
        url="GitHub-hosted test table (search index file 62193952648; the index does not name its repository)",
        date="2026-07-22",
        software="nvbandwidth v0.10.0, CUDA 13.2, driver 595.71.05",
    ),
    "nvbw-b300": Source(
        "carried",
        "measured on a Dell PowerEdge XE9780 with 7 of 8 B300 SXM6 (same NVLink 5 and NVLink switch as B200 and "
        "GB200, no B200/GB200 nvbandwidth run found): device_to_device_memcpy_write_ce 774.15-774.57 GB/s, "
        "_read_ce 764.16-766.34; bidirectional write 769.36-770.33 GB/s per direction with the other one busy",
        url="GitHub-hosted server test report 'Power Edge XE9780 Server Performance Test - 8/31' (search index file "
        "63314792526; repository not named by the index)",
        date="2026-08-31",
        software="nvbandwidth v0.10.0, CUDA 13.3, driver 610.57.04",
    ),
    "p2p-a100": Source(
        "measured",
        "p2pBandwidthLatencyTest on 8x A100 (NVLink 3, NVSwitch): unidirectional P2P writes 270.84-276.9 GB/s "
        "per pair ('274GBps out of the advertised 300GBps')",
        url=f"{STAS}:network/README.md, 'Real network throughput'",
        software="CUDA samples p2pBandwidthLatencyTest",
    ),
    "h200x2-probe": Source(
        "carried",
        "measured by pkroof probe on the 2x H200 node (NVLink 4 through NVSwitch, 2026-11-30; topology/data/"
        "h200x2.json, benchmarks/probe/2026-11-30-probe-h200x2.md): no published run gives these for 8-GPU machines. "
        "For Hopper presets the same link and switch generation; for the others the nearest measurement, slower or "
        "faster than theirs by an unknown amount",
        url="topology/data/h200x2.json",
        date="2026-11-30",
        software="driver 580.159.04, torch 2.11.0+cu130, NCCL 2.28.9, Triton 3.6.0",
    ),
    "h200x2-calibrate": Source(
        "carried",
        "the fixed costs pkroof's own kernels measured per call on the 2x H200 node (pkroof topology calibrate: a "
        "staged collective's hand-off, a fused kernel's per schedule; "
        "benchmarks/kernels/2026-11-30-fixed-costs-h200x2.md): "
        "no other machine has them measured; the same Hopper generation for H100/H200, carried further for the rest",
        url="topology/data/h200x2.json",
        date="2026-12-01",
    ),
    "peers-sglang2904": Source(
        "measured",
        "how a staged all-reduce's fixed cost grows with the peer count, from two published custom all-reduces (pull, "
        "one-shot) timed on one H100 node at 2, 4 and 8 ranks with 512 elements (2 KiB as fp32, so bytes add "
        "< 0.05 µs): sglang's TensorRT-LLM-derived kernel 3.7, 4.8, 5.9 µs and vLLM's 9.5, 9.1, 10.1 µs (eager); "
        "from 1 to 7 peers they grow 0.37 and 0.10 µs per peer, and each further peer is charged their mean, 0.23 µs "
        "(tests/data/head_to_head: the split=tune rows; carried to every preset but the measured 2-GPU node)",
        url="https://github.com/sgl-project/sglang/pull/2904",
        date="2025-01-15",
    ),
    "nvls-nccl-tests212": Source(
        "carried",
        "NCCL's NVLink SHARP (multimem) all-reduce on 8 H100s at large sizes, as NCCL's maintainer gives it: algbw "
        "~275 GB/s (busbw ~480 GB/s), also reported 275 GB/s by NVIDIA/nccl#2140; each rank moves (n+1)/n·S each way "
        "through the switch, so the per-direction multimem rate is 275 · 9/8 = 309 GB/s (MULTIMEM_DUPLEX_BPS)",
        url="https://github.com/NVIDIA/nccl-tests/issues/212",
        date="2024-05-06",
    ),
    "multimem-nominal": Source(
        "nominal",
        "nominal: no multimem kernel's α, step latency or per-peer flag cost was found published (NCCL's NVLS "
        "latencies include its own launch and protocol); SM loads' figures are carried, as a multimem.ld_reduce is "
        "an SM load through the switch",
    ),
    "derived": Source(
        "nominal",
        "derived by pkroof from the other numbers of this preset, as the mechanism's note says (per-CTA bandwidth = "
        "peak / SMs to saturate; a both-ways rate = the one-way peak × the 2x H200 node's both-ways share)",
    ),
    "pk-2025-b200": Source(
        "measured",
        "Sul et al., ParallelKittens, arXiv:2511.13940 (2025), 1 GB transfers on "
        "8xB200: copy engine ~726 GB/s, TMA ~669, SM ld/st ~628 of 900; TMA saturates "
        "NVLink with ~15 of 148 SMs, ld/st with ~76 (the paper's tables were not re-readable in this review)",
        url="https://arxiv.org/abs/2511.13940",
        date="2025-11",
    ),
    "pk-2025-b200-carried": Source(
        "carried",
        "ParallelKittens' 8xB200 transfer rates (the pk-2025-b200 source: TMA ~669 GB/s with 15 SMs, SM ld/st "
        "~628 with 76): GB200's GPU is the same Blackwell die on the same NVLink 5; no GB200 figure was found",
        url="https://arxiv.org/abs/2511.13940",
        date="2025-11",
    ),
    "a100-link-eff": Source(
        "nominal",
        "NVIDIA/nccl-tests issue 149 (NCCL maintainer, 2023-07-05): each NVLink 3 link carries ~20 GB/s of payload "
        "per direction with SMs' 128 B writes, 12 links = 240 GB/s (copy engines use 256 B)",
        url="https://github.com/NVIDIA/nccl-tests/issues/149",
        date="2023-07-05",
    ),
    "pcie-analog": Source(
        "carried",
        "no L40S measurement was found (nccl-tests, nvbandwidth or p2pBandwidthLatencyTest): RTX A6000s on PCIe "
        "Gen4 x16 under one switch measured device_to_device_memcpy_read_ce 26.34 GB/s per pair (21.8 across "
        "switches), the same link",
        url="https://github.com/NVIDIA/nvbandwidth/issues/50",
        date="2025-11-03",
        software="nvbandwidth v0.8, CUDA 13.0, driver 580.95.05",
    ),
    "mamf": Source(
        "measured",
        "stas00's Maximum Achievable Matmul FLOPS tables (torch.mm over a search of shapes, mean of 100 calls after "
        "50 warm-up, best shape): bf16 A100 SXM 271.2, H100 SXM 794.5 ('H200 is the same'), B200 1745.0, GB200 "
        "1822.0 TFLOP/s; fp8 H100 1402.6, H200 1453.4, B200 3432.5, GB200 3615.6. One figure for both a call "
        "alone and a loop of them: no continuous-load rate was published",
        url=f"{STAS}:compute/accelerator/README.md, 'Maximum Achievable Matmul FLOPS comparison table'",
        software="torch 2.6.0+cu126 (A100), 2.7.0+cu126 (H100), 2.7.1+cu128 (H200 fp8, B200), "
        "2.10.0.dev20250916+cu130 (GB200)",
    ),
    "mamf-fp16": Source(
        "carried",
        "fp16 runs the tensor cores at bf16's rate (every datasheet here lists one figure for both): bf16's "
        "measured matmul rate, as the mamf source gives it",
        url=f"{STAS}:compute/accelerator/README.md",
    ),
    "nccl-model": Source(
        "nominal",
        "NCCL's own tuning model, which picks its algorithm and protocol (src/graph/tuning.cc and topo.h, read at "
        "NVIDIA/nccl@b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2 and, for NCCL 2.28's values, in annotated quotes of "
        "src/graph/tuning.cc / src/tuning/nvls.cc): a ring's bus bandwidth = links x the per-link constant "
        "(SM80 20.0, SM90 20.6, SM100 40.1 GB/s; PCIe Gen3 12, Gen4 taken as 24); LL capped at 87.7 (Ampere), "
        "141 (Hopper), 282 (Blackwell) GB/s; LL128 at 36.7 GB/s per channel (Hopper; the Ampere and Blackwell "
        "caps are above 92% of their links with 32 channels); NVLS efficiency 0.85 (Hopper), 0.74 (Blackwell) "
        "over 16 NVLS channels; NCCL_MAX_NCHANNELS 32",
        url="github.com/NVIDIA/nccl@b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2:src/graph/tuning.cc",
        software="NCCL 2.19-2.28",
    ),
    "nccl-h200": Source(
        "measured",
        "8x H200 (single node): nccl-tests all_reduce_perf default, 32 KiB-16 GiB ('How the calls are timed', "
        "nccl-tests column), RING/LL up to 1 MiB and NVLS/SIMPLE from 2 MiB by NCCL_DEBUG=TUNING; the GPU-count "
        "table (8 GiB, NVLS on and off: ring at 4 GPUs, NVLS from 5); the 16 GiB collective table. Lines fitted "
        f"by benchmarks/model/fit_nccl.py to the rows with split=tune of {TABLE}",
        url=f"{STAS}@0cc3de50b2dd083c34d848a1dcb5bfe65fe3dace:network/benchmarks/README.md; {STAS}:network/README.md "
        "(SHARP)",
        software="nccl-tests against NCCL 2.30.7 (torch 2.14.0+cu130, CUDA 13.0); 2.27.7 for the 16 GiB tables",
    ),
    "nccl-h200-host": Source(
        "measured",
        "8x H200, one torch.distributed all-reduce at a time that the program waits for (the older "
        "all_reduce_bench.py table, NCCL 2.27.7) against nccl-tests' queued calls of the same size: 20.6-21.9 µs "
        "more per call at 32 KiB and 1 MiB (stas00: 'PyTorch's per-call host overhead of some 20-30us'); "
        "benchmarks/model/fit_nccl.py",
        url=f"{STAS}:network/README.md ('Real network throughput', 8x H200 table)",
        software="NCCL 2.27.7, torch (version not stated)",
    ),
    "nccl-h200-symmetric": Source(
        "measured",
        "an 8-byte all-reduce over buffers registered for NCCL 2.27's symmetric kernels, tuned, 'about 2.3 us' on "
        "8x H200 or H800 (3 us on 8x B200); the bandwidth beyond it is assumed the LL ring's (none published)",
        url="https://github.com/NVIDIA/nccl/issues/1940",
        date="2025-12-12",
        software="nccl-tests, NCCL 2.27+ (symmetric memory)",
    ),
    "nccl-b200": Source(
        "measured",
        "8x B200: the GPU-count table on AWS p6-b200 (8 GiB, NVLS on and off; NCCL stays on the ring at 4 and 5 "
        "GPUs, NVLS from 6, chosen by NCCL_TUNER_PLUGIN=ofi; 2026-08-09) and nccl-tests 8 MiB-16 GiB on GCP A4 "
        "(a4-highgpu-8g, 2025-10-26; busbw 739 at 4 GiB, 840 at 8 GiB: NVLS only from above 4 GiB; one process "
        "driving the 8 GPUs, 'nThread 1 nGpus 8', which may add to its start-up). Lines fitted by "
        f"benchmarks/model/fit_nccl.py to the rows with split=tune of {TABLE}",
        url=f"{STAS}:network/README.md (SHARP); GitHub-hosted guide 'DeepEP 在 GKE B200 GPU 节点上的安装指南' "
        "(search index file 36588483035)",
        date="2026-08-09",
        software="NCCL 2.27.7 (p6-b200); NGC 25.04 container (GKE)",
    ),
    "nccl-gb200": Source(
        "measured",
        "GB200 NVL72: all_reduce_perf on a full 72-GPU rack, 512 MiB-8 GiB (CoreWeave, NCCL 2.26.2, 2025-02-20); "
        "on one 4-GPU tray with NCCL_ALGO=Ring, 1 KiB-8 GiB (Azure ND GB200 v6, NCCL 2.25.1); alltoall_perf on one "
        "tray, 4-8 GiB (OCI). Lines fitted by benchmarks/model/fit_nccl.py to the rows with split=tune of "
        f"{TABLE}",
        url="https://github.com/coreweave/nccl-tests/pull/43; github.com/Azure/AI-benchmarking-guide@"
        "2a370be6de9586d365feed77e014a73f25198f4d:Azure_Results/ND_GB200_v6_results.md; 'OCI GPU Quick Start: "
        "NVIDIA GB200' (search index file 52252791387)",
        date="2025-02-20",
        software="nccl-tests; NCCL 2.26.2 (rack), 2.25.1 (tray, ring)",
    ),
    "nccl-gb200-carried": Source(
        "carried",
        "NCCL's lines fitted to one GB200 NVL72 rack's published runs (the nccl-gb200 source: all_reduce_perf on 72 "
        "GPUs, the 4-GPU tray's ring, alltoall_perf on one tray), carried to the 576-GPU domain: the same GPU, "
        "NVLink 5 and NCCL, which sees one NVLink domain whatever its switch tiers ('The different NVSwitches are "
        "not visible to NCCL', NCCL maintainer, NVIDIA/nccl#1006). NCCL's model still picks per call at the call's "
        "world size (a ring's 2(n-1) steps); no NCCL run on more than 72 GPUs of one NVLink domain was found, and "
        "a second switch tier only adds latency, so these are optimistic there",
        url="https://github.com/coreweave/nccl-tests/pull/43; https://github.com/NVIDIA/nccl/issues/1006",
        date="2025-02-20",
        software="nccl-tests; NCCL 2.26.2 (rack), 2.25.1 (tray, ring)",
    ),
    "nvls-partition": Source(
        "nominal",
        "NVIDIA GB200 NVL Partition User Guide: 'partitions that have less than or equal to four GPUs will not "
        "benefit from multicast' (quoted by stas00); NCCL stayed on the ring at 4 GPUs on 8x H200 and 8x B200",
        url=f"{STAS}:network/README.md (SHARP)",
    ),
    "nccl-a100": Source(
        "measured",
        "8x A100 (NVLink 3, NVSwitch): nccl-tests all_reduce_perf -b 32k -e 16G -f 2 -g 8 (stas00), on 2 of "
        "8 A100-40GB at 32 and 64 B (NVIDIA/nccl#583, 2021: the LL step's latency, 2.7 µs, from the two world "
        "sizes) and sendrecv_perf -b 128M -e 1G -f 2 -g 8 (li-plus; the p2p line's base is NCCL's Simple base, "
        "no small send/recv being measured). Lines fitted by benchmarks/model/fit_nccl.py to the rows with "
        f"split=tune of {TABLE}",
        url=f"{STAS}:network/README.md ('Real network throughput'); https://github.com/NVIDIA/nccl/issues/583; "
        "github.com/li-plus/playground@b85070fb449ea55858fed14cf69cefe10592261b:cuda/nccl.md",
        software="nccl-tests (NCCL version not printed)",
    ),
    "nccl-h200x2-p2p": Source(
        "carried",
        "NCCL's all-to-all on the 2x H200 node as pkroof probe fitted it (topology/data/h200x2.json: its regimes, "
        "CUDA-graph timed): no 8-GPU Hopper all-to-all or send/recv run was found; peers taken to be served at once",
        url="topology/data/h200x2.json",
        date="2026-11-30",
        software="NCCL 2.28.9",
    ),
    "nccl-carried-hopper": Source(
        "carried",
        "NCCL lines measured on 8x H200 (the nccl-h200 source) and the host overhead measured there: the same "
        "NVLink 4 and NVSwitch gen3 for H100; for other machines the nearest measurement of what a call costs "
        "beyond its transfer",
        url=f"{STAS}@0cc3de50b2dd083c34d848a1dcb5bfe65fe3dace:network/benchmarks/README.md",
        software="NCCL 2.27.7-2.30.7",
    ),
    "nccl-net": Source(
        "measured",
        "NCCL maintainer (NVIDIA/nccl-tests#290, 2025-03-03): NCCL reaches 46-48 GB/s per NDR 400 Gb/s NIC across "
        "nodes, 0.94 of the 50 GB/s line rate",
        url="https://github.com/NVIDIA/nccl-tests/issues/290",
        date="2025-03-03",
    ),
    "nccl-channels": Source(
        "nominal",
        "assumption: NCCL runs one CTA per channel and up to 32 channels (its default NCCL_MAX_NCHANNELS) on NVLink "
        "nodes; it often uses fewer",
    ),
    "ib-latency-assumed": Source(
        "nominal",
        "assumption, not a measurement: 3 µs GPU-to-GPU one way through one InfiniBand switch level with "
        "GPUDirect RDMA",
    ),
    "cx6-hdr": Source(
        "nominal",
        "NVIDIA DGX A100 System Architecture whitepaper (2020): 8x single-port "
        "ConnectX-6 VPI HDR InfiniBand 200 Gb/s for compute",
        date="2020",
    ),
}


@cache
def _measured_h200x2() -> Topology:
    """The 2×H200 node's probe and calibrations, whose figures presets carry where nothing was published."""
    return load(H200X2)


def _topology(**fields: object) -> Topology:
    """A Topology whose source catalogue holds exactly the sources its records cite."""
    records = [fields["gpu"], fields["scaleup"], *fields["mechanisms"].values(), fields["nic"]]
    records += [m.tuning for m in fields["mechanisms"].values() if m.tuning is not None]
    cited = sorted({i for r in records if r is not None for i in r.sources.values()})
    return Topology(**fields, sources={i: SOURCES[i] for i in cited})


def _all(source: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, source)


def _unavailable(note: str) -> MechanismSpec:
    return MechanismSpec(False, 0.0, 0.0, None, 0, note)


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


def _gpu(name: str, arch: str, sms: int, capacity: int, hbm_Bps: float, peak: dict, mamf: dict, src: str) -> GPU:
    """A GPU at its datasheet's peaks (the roof), predicted at its measured matmul rates where any were published."""
    rates = dict(mamf) | ({"fp16": mamf["bf16"]} if "bf16" in mamf and "fp16" in peak else {})
    sources = _all(src, "hbm_capacity_bytes", "hbm_bandwidth_Bps", "peak_flops", "sm_count")
    if mamf:
        sources |= _all("mamf", "sustained_flops", "burst_flops")
    return GPU(name, arch, sms, capacity, hbm_Bps, peak, sources, sustained_flops=rates, burst_flops=rates)


# Each peer beyond the first adds this to a staged collective's hand-off: the mean growth per peer of two published
# one-shot pull all-reduces at 2 KiB from 2 to 8 H100s ((5.9 − 3.7) / 6 = 0.37 µs and (10.1 − 9.5) / 6 = 0.10 µs;
# the "peers-sglang2904" source). The 2-GPU node's hand-off (handoff_s) was measured with one peer.
PER_PEER_S = ((5.9e-6 - 3.7e-6) / 6 + (10.1e-6 - 9.5e-6) / 6) / 2


def _mech(
    carry: str,
    peak_Bps: float,
    peak_src: str,
    note: str,
    *,
    ctas: int | None = None,
    duplex: tuple[float, str] | None = None,
) -> MechanismSpec:
    """A mechanism at its own `peak_Bps`, carrying what no published run measures from the same mechanism on the
    2×H200 node (`carry`): α and step latency, fixed costs, the per-CTA rate and both-ways rate scaled with the
    peak (or the per-CTA rate from `ctas` to saturate, a both-ways rate measured here in `duplex`)."""
    m = _measured_h200x2().mechanisms[carry]
    scale = peak_Bps / m.peak_bandwidth_Bps
    same = abs(scale - 1) < 1e-9
    src = {"peak_bandwidth_Bps": peak_src, "latency_s": "h200x2-probe"}
    per_cta = None
    if m.per_cta_bandwidth_Bps is not None:
        per_cta = peak_Bps / ctas if ctas else m.per_cta_bandwidth_Bps * scale
        src["per_cta_bandwidth_Bps"] = "h200x2-probe" if same and not ctas else "derived"
    if m.step_latency_s is not None:
        src["step_latency_s"] = "h200x2-probe"
    if duplex is not None:
        both, src["duplex_bandwidth_Bps"] = duplex
    else:
        both, src["duplex_bandwidth_Bps"] = m.duplex_bandwidth_Bps * scale, "h200x2-probe" if same else "derived"
    if m.handoff_s:
        src["handoff_s"] = "h200x2-calibrate"
    if m.overlap_s:
        src["overlap_s"] = "h200x2-calibrate"
    device = carry != "copy-engine"  # SM kernels' flags; the copy engine's per-peer DMAs have no published figure
    if device:
        src["per_peer_s"] = "peers-sglang2904"
    return MechanismSpec(
        True,
        m.latency_s,
        peak_Bps,
        per_cta,
        0,
        note,
        m.step_latency_s,
        src,
        {},
        m.handoff_s,
        both,
        dict(m.overlap_s),
        per_peer_s=PER_PEER_S if device else 0.0,
    )


# Multimem's rate per direction with both directions busy: NCCL's NVLS all-reduce on 8 H100s reaches algbw ~275 GB/s
# (NVIDIA/nccl-tests#212, the "nvls-nccl-tests212" source) while each rank moves (n+1)/n·S = 9/8·S each way, so
# 275 · 9/8 GB/s per direction on NVLink 4's 450 GB/s ports; other generations take the same fraction of their ports'
# rate (no other generation's NVLS rate is cited here).
MULTIMEM_DUPLEX_BPS = 275e9 * 9 / 8
NVLINK4_PORT_BPS = 18 * 25e9


def _multimem(link_Bps: float, sm_load: MechanismSpec) -> MechanismSpec:
    """In-network reduction by multimem loads and stores: the roof at the switch ports' rate (the link's); the rate
    both ways from NCCL's published NVLS all-reduce (never above SM loads' both-ways rate scaled to this link); α,
    step latency, per-CTA rate and per-peer cost are SM loads', marked nominal (none was published for multimem)."""
    src = {"peak_bandwidth_Bps": "switch-port", "duplex_bandwidth_Bps": "nvls-nccl-tests212"}
    src |= _all("multimem-nominal", "latency_s", "step_latency_s", "per_cta_bandwidth_Bps", "per_peer_s")
    note = (
        "in-network reduction at the switch ports' rate for the roof; predicted both ways at NCCL's published NVLS "
        "rate, with SM loads' α and per-peer cost (nominal: none published for multimem); not run by pkroof: "
        "multicast stays off"
    )
    return MechanismSpec(
        True,
        sm_load.latency_s,
        link_Bps,
        sm_load.per_cta_bandwidth_Bps,
        0,
        note,
        sm_load.step_latency_s,
        src,
        duplex_bandwidth_Bps=link_Bps * MULTIMEM_DUPLEX_BPS / NVLINK4_PORT_BPS,
        per_peer_s=sm_load.per_peer_s,
    )


def _nccl(tuning: NcclTuning, sources: dict[str, str]) -> MechanismSpec:
    """NCCL: what it runs by default and what that costs (rooflines/nccl.py); its single-ring fields (α of a ring's
    first LL step, each further step, the ring's Simple bus bandwidth over its channels) for what reads NCCL as one
    ring (the report's model curves, the roof's candidates)."""
    ll, simple = tuning.lines["ring/ll"][0], tuning.lines["ring/simple"][-1]
    src = _all(sources["lines.ring/ll"], "latency_s", "step_latency_s")
    src["peak_bandwidth_Bps"] = sources["lines.ring/simple"]
    src |= _all("nccl-channels", "per_cta_bandwidth_Bps", "num_ctas_default")
    peak = simple.bandwidth_Bps
    return MechanismSpec(
        True,
        ll.base_s + ll.step_s,
        peak,
        peak / tuning.channels,
        tuning.channels,
        f"NCCL {tuning.version} as it runs by default: its tuning model picks the algorithm and protocol, the "
        "published runs of that pair price it (tuning.model.lines; NCCL's own model where none was measured)",
        ll.step_s,
        src,
        tuning=NcclSpec(tuning, sources),
    )


def _lines(**pairs: tuple[tuple[float, float, float], ...]) -> dict[str, tuple[NcclLine, ...]]:
    """{"ring_ll": ((base_s, step_s, bandwidth_Bps), ...)} → {"ring/ll": (NcclLine, ...)}."""
    return {k.replace("_", "/", 1): tuple(NcclLine(*line) for line in v) for k, v in pairs.items()}


def _carried_p2p() -> tuple[tuple[float, float, float], ...]:
    """NCCL's all-to-all as the probe fitted it on the 2×H200 node: (α, 0, β) per regime."""
    fits = _measured_h200x2().mechanisms["nccl"].collectives["all-to-all"]
    return tuple((f.latency_s, 0.0, f.peak_bandwidth_Bps) for f in fits)


# NCCL's per-machine tuning. The choice inputs are NCCL's documented constants (nccl-model); the lines price what it
# picks, fitted by benchmarks/model/fit_nccl.py to the published runs with split=tune (see each source); a pair
# without lines is priced by NCCL's own model.
NCCL_MODEL = ("channels", "link_Bps", "ll_max_Bps", "ll128_channel_Bps", "nvls_efficiency", "nvls_channels")


def _hopper_nccl() -> NcclTuning:
    return NcclTuning(
        version="2.27",
        channels=32,
        fabric="nvlink",
        link_Bps=18 * 20.6 * GB,
        ll_max_Bps=141 * GB,
        ll128_channel_Bps=36.7 * GB,
        nvls_efficiency=0.85,
        nvls_channels=16,
        nvls_min_ranks=5,
        lines=_lines(
            ring_ll=((9.007e-6, 0.6e-6, 284.93 * GB),),
            ring_simple=((8.4e-6, 3.4e-6, 364.95 * GB),),
            nvls_simple=((25e-6, 0.0, 138.72 * GB), (30.02e-6, 0.0, 178.74 * GB), (70.98e-6, 0.0, 269.19 * GB)),
            symmetric_ll=((2.3e-6, 0.0, 284.93 * GB),),
            p2p_simple=_carried_p2p(),
        ),
        host_overhead_s=21.3e-6,
        net_efficiency=0.94,
    )


def _hopper_nccl_sources(measured_here: bool) -> dict[str, str]:
    lines = "nccl-h200" if measured_here else "nccl-carried-hopper"
    return (
        _all("nccl-model", *NCCL_MODEL)
        | {"channels": "nccl-channels", "nvls_min_ranks": lines, "net_efficiency": "nccl-net"}
        | _all(lines, "lines.ring/ll", "lines.ring/simple", "lines.nvls/simple")
        | {"lines.symmetric/ll": "nccl-h200-symmetric" if measured_here else "nccl-carried-hopper"}
        | {"lines.p2p/simple": "nccl-h200x2-p2p"}
        | {"host_overhead_s": "nccl-h200-host" if measured_here else "nccl-carried-hopper"}
    )


def _blackwell_nccl(*, nvls_min_ranks: int, nvls_min_bytes: float, lines: dict) -> NcclTuning:
    return NcclTuning(
        version="2.27",
        channels=32,
        fabric="nvlink",
        link_Bps=18 * 40.1 * GB,
        ll_max_Bps=282 * GB,
        ll128_channel_Bps=36.7 * GB,
        nvls_efficiency=0.74,
        nvls_channels=16,
        nvls_min_ranks=nvls_min_ranks,
        nvls_min_bytes=nvls_min_bytes,
        lines=lines,
        host_overhead_s=21.3e-6,
        net_efficiency=0.94,
    )


def _hopper(name: str, description: str, gpu: GPU, *, measured_h200: bool) -> Topology:
    """HGX H100 / H200: NVLink 4 through 4 NVSwitch gen3 (multicast). The copy engine's peak is H100's measured
    nvbandwidth run (carried to H200: the same link and switch); the SM mechanisms', the 2×H200 node's probe."""
    carried = "" if measured_h200 else " (carried from H200: the same link and switch)"
    ce_src = "nvbw-h100-carried" if measured_h200 else "nvbw-h100"
    sm_load = _mech(
        "sm-load",
        _measured_h200x2().mechanisms["sm-load"].peak_bandwidth_Bps,
        "h200x2-probe",
        "SM loads from a peer, as the 2×H200 node's probe measured them (same NVLink 4)",
    )
    mechanisms = {
        "copy-engine": _mech(
            "copy-engine",
            397.48 * GB,
            ce_src,
            "host-issued peer copies; no SMs; peak: nvbandwidth write CE on 8×H100",
            duplex=(775.34 / 2 * GB, ce_src),
        ),
        "sm-load": sm_load,
        "sm-store": _mech(
            "sm-store",
            _measured_h200x2().mechanisms["sm-store"].peak_bandwidth_Bps,
            "h200x2-probe",
            "SM stores to a peer, as the 2×H200 node's probe measured them",
        ),
        "tma": _mech(
            "tma",
            _measured_h200x2().mechanisms["tma"].peak_bandwidth_Bps,
            "h200x2-probe",
            "TMA bulk copies, as the 2×H200 node's probe measured them",
        ),
        "multimem": _multimem(18 * 25 * GB, sm_load),
        "nccl": _nccl(_hopper_nccl(), _hopper_nccl_sources(measured_h200)),
    }
    return _topology(
        name=name,
        description=description + carried,
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
    gpu = _gpu(
        "NVIDIA H100 80GB HBM3",
        "hopper",
        132,
        80 * GiB,
        3.35e12,
        dict(HOPPER_FLOPS),
        {"bf16": 794.5 * TFLOPS, "fp8": 1402.6 * TFLOPS},
        "h100-datasheet",
    )
    gpu = _cited(gpu, sm_count="hopper-whitepaper")
    return _hopper(
        "hgx-h100-8",
        "8x H100 SXM5, NVLink 4 through 4 NVSwitch gen3 (NVLS), 8x ConnectX-7 NDR",
        gpu,
        measured_h200=False,
    )


def _hgx_h200_8() -> Topology:
    gpu = _gpu(
        "NVIDIA H200",
        "hopper",
        132,
        141 * 10**9,
        4.8e12,
        dict(HOPPER_FLOPS),
        {"bf16": 794.5 * TFLOPS, "fp8": 1453.4 * TFLOPS},
        "h200-datasheet",
    )
    gpu = _cited(gpu, sm_count="hopper-whitepaper")
    return _hopper(
        "hgx-h200-8", "8x H200 SXM, NVLink 4 through 4 NVSwitch gen3 (NVLS), 8x ConnectX-7 NDR", gpu, measured_h200=True
    )


def _cited(gpu: GPU, **sources: str) -> GPU:
    return GPU(**{**gpu.__dict__, "sources": gpu.sources | sources})


BLACKWELL_FLOPS = {"bf16": 2250, "fp16": 2250, "fp8": 4500, "tf32": 1100, "fp32": 80}
GB200_FLOPS = {"bf16": 2500, "fp16": 2500, "fp8": 5000, "tf32": 1250, "fp32": 80}


def _blackwell_mechanisms(nccl: MechanismSpec, pk: str) -> dict[str, MechanismSpec]:
    """NVLink 5: the copy engine at B300's measured nvbandwidth rate (the same link and switch; no B200 or GB200 run
    found), the SM mechanisms at ParallelKittens' B200 figures with its SM counts, latencies and fixed costs carried
    from the 2×H200 node (no Blackwell measurement)."""
    ld_st = 628.35 * GB
    sm_load = _mech(
        "sm-load",
        ld_st,
        pk,
        "SM ld/st rate on 8×B200 (ParallelKittens); saturates with 76 "
        "SMs; latencies and both-ways share from the 2×H200 node",
        ctas=76,
    )
    return {
        "copy-engine": _mech(
            "copy-engine",
            774.57 * GB,
            "nvbw-b300",
            "host-issued peer copies; no SMs; peak: B300's nvbandwidth write CE (same NVLink 5)",
            duplex=(770.33 * GB, "nvbw-b300"),
        ),
        "sm-load": sm_load,
        "sm-store": _mech(
            "sm-store",
            ld_st,
            pk,
            "SM ld/st rate on 8×B200 (ParallelKittens); saturates "
            "with 76 SMs; latencies and both-ways share from the 2×H200 node",
            ctas=76,
        ),
        "tma": _mech(
            "tma",
            669.12 * GB,
            pk,
            "TMA on 8×B200 (ParallelKittens); saturates with 15 SMs; "
            "latencies and both-ways share from the 2×H200 node",
            ctas=15,
        ),
        "multimem": _multimem(18 * 50 * GB, sm_load),
        "nccl": nccl,
    }


def _hgx_b200_8() -> Topology:
    gpu = _gpu(
        "NVIDIA B200",
        "blackwell",
        148,
        180 * 10**9,
        8e12,
        {k: v * TFLOPS for k, v in BLACKWELL_FLOPS.items()},
        {"bf16": 1745.0 * TFLOPS, "fp8": 3432.5 * TFLOPS},
        "b200-datasheet",
    )
    gpu = _cited(gpu, sm_count="blackwell-whitepaper")
    tuning = _blackwell_nccl(
        nvls_min_ranks=6,
        nvls_min_bytes=4 * GiB,
        lines=_lines(
            ring_ll=((9.007e-6, 0.6e-6, 284.93 * GB),),
            ring_ll128=((25.19e-6, 1.9e-6, 514.63 * GB),),
            ring_simple=((8.4e-6, 3.4e-6, 695.9 * GB),),
            nvls_simple=((623.9e-6, 0.0, 491.74 * GB),),
            symmetric_ll=((2.3e-6, 0.0, 284.93 * GB),),
            p2p_simple=_carried_p2p(),
        ),
    )
    sources = (
        _all("nccl-model", *NCCL_MODEL)
        | {"channels": "nccl-channels", "net_efficiency": "nccl-net", "host_overhead_s": "nccl-carried-hopper"}
        | _all("nccl-b200", "nvls_min_ranks", "nvls_min_bytes", "lines.ring/ll128", "lines.ring/simple")
        | {"lines.nvls/simple": "nccl-b200", "lines.ring/ll": "nccl-carried-hopper"}
        | {"lines.symmetric/ll": "nccl-carried-hopper", "lines.p2p/simple": "nccl-h200x2-p2p"}
    )
    return _topology(
        name="hgx-b200-8",
        description="8x B200, NVLink 5 through 2 NVLink switch chips (NVLS), 8x ConnectX-7 NDR",
        nodes=1,
        gpus_per_node=8,
        gpu=gpu,
        scaleup=_nvlink("NVLink 5.0", 18, 50.0, 2, True, "blackwell-whitepaper"),
        mechanisms=_blackwell_mechanisms(_nccl(tuning, sources), "pk-2025-b200"),
        nic=_nic("ConnectX-7", 400, 8, "b200-datasheet"),
    )


def _gb200_gpu() -> GPU:
    gpu = _gpu(
        "NVIDIA GB200",
        "blackwell",
        148,
        186 * 10**9,
        8e12,
        {k: v * TFLOPS for k, v in GB200_FLOPS.items()},
        {"bf16": 1822.0 * TFLOPS, "fp8": 3615.6 * TFLOPS},
        "gb200-nvl72",
    )
    return _cited(gpu, sm_count="blackwell-whitepaper")


def _gb200_nccl(lines_source: str) -> MechanismSpec:
    """NCCL on GB200's NVLink 5 domain: its own model picks per call at the call's world size (ring steps 2(n−1),
    NVLS from 5 ranks), the lines fitted to one rack's published runs (`lines_source`) price what it picks."""
    tuning = _blackwell_nccl(
        nvls_min_ranks=5,
        nvls_min_bytes=0.0,
        lines=_lines(
            ring_ll=((12.05e-6, 0.6e-6, 254.58 * GB),),
            ring_ll128=((14e-6, 1.9e-6, 497.25 * GB),),
            ring_simple=((8.4e-6, 3.4e-6, 619.85 * GB), (116.9e-6, 3.4e-6, 684.58 * GB)),
            nvls_simple=((25e-6, 0.0, 298.91 * GB), (607.9e-6, 0.0, 443.41 * GB)),
            symmetric_ll=((2.3e-6, 0.0, 254.58 * GB),),
            p2p_simple=((8.4e-6, 0.0, 644.0 * GB),),
        ),
    )
    sources = (
        _all("nccl-model", *NCCL_MODEL)
        | {"channels": "nccl-channels", "net_efficiency": "nccl-net", "host_overhead_s": "nccl-carried-hopper"}
        | {"nvls_min_ranks": "nvls-partition", "lines.symmetric/ll": "nccl-carried-hopper"}
        | _all(lines_source, "lines.ring/ll", "lines.ring/ll128", "lines.ring/simple", "lines.nvls/simple")
        | {"lines.p2p/simple": lines_source}
    )
    return _nccl(tuning, sources)


def _gb200_nvl72() -> Topology:
    return _topology(
        name="gb200-nvl72",
        description="GB200 NVL72: 72 Blackwell GPUs in one NVLink 5 domain, 18 switch chips",
        nodes=1,
        gpus_per_node=72,
        gpu=_gb200_gpu(),
        scaleup=_nvlink("NVLink 5.0", 18, 50.0, 18, True, "gb200-nvl72"),
        mechanisms=_blackwell_mechanisms(_gb200_nccl("nccl-gb200"), "pk-2025-b200-carried"),
        nic=None,
    )


def _latencies_cited(mechanisms: dict[str, MechanismSpec], source: str) -> dict[str, MechanismSpec]:
    """The same mechanisms with their α and step latency cited to `source` (where a preset's reason for carrying
    them differs from the measurement's own)."""
    out = {}
    for name, m in mechanisms.items():
        latencies = {f: source for f in ("latency_s", "step_latency_s") if m.sources.get(f) == "h200x2-probe"}
        out[name] = replace(m, sources=m.sources | latencies)
    return out


def _gb200_nvl576() -> Topology:
    """One NVLink domain of 576 GB200 GPUs, as announced and never measured in public: the NVL72 rack's GPU,
    mechanisms and NCCL lines, its per-GPU link at the announced 1.8 TB/s both ways, its latencies the rack's (a
    second switch tier only adds to them, so the rack's are a floor)."""
    mechanisms = _blackwell_mechanisms(_gb200_nccl("nccl-gb200-carried"), "pk-2025-b200-carried")
    return _topology(
        name="gb200-nvl576",
        description="GB200 NVL576 (announced; nominal): 576 Blackwell GPUs in one NVLink 5 domain, 8 NVL72 racks "
        "joined by a second tier of NVLink switches; no measurement of such a system is published, so its link is "
        "the announced figure and its rates and latencies are the NVL72 rack's",
        nodes=1,
        gpus_per_node=576,
        gpu=_gb200_gpu(),
        scaleup=_nvlink("NVLink 5.0", 18, 50.0, 8 * 18, True, "gb200-nvl576"),
        mechanisms=_latencies_cited(mechanisms, "nvl576-latency"),
        nic=None,
    )


def _dgx_a100_8() -> Topology:
    gpu = _gpu(
        "NVIDIA A100-SXM4-80GB",
        "ampere",
        108,
        80 * GiB,
        2.039e12,
        {"bf16": 312 * TFLOPS, "fp16": 312 * TFLOPS, "tf32": 156 * TFLOPS, "fp32": 19.5 * TFLOPS},
        {"bf16": 271.2 * TFLOPS},
        "a100-datasheet",
    )
    gpu = _cited(gpu, sm_count="ampere-whitepaper")
    sm_note = "SMs write 128 B payloads: ~20 GB/s per NVLink 3 link (NCCL maintainer); latencies from the 2×H200 node"
    tuning = NcclTuning(
        version="2.18",
        channels=32,
        fabric="nvlink",
        link_Bps=12 * 20.0 * GB,
        ll_max_Bps=87.7 * GB,
        ll128_channel_Bps=20.0 * GB,
        lines=_lines(
            ring_ll=((6.6e-6, 2.73e-6, 30.819 * GB),),
            ring_ll128=((16.53e-6, 1.9e-6, 125.76 * GB),),
            ring_simple=((8.4e-6, 3.4e-6, 234.99 * GB), (445.2e-6, 3.4e-6, 243.68 * GB)),
            p2p_simple=((8.4e-6, 0.0, 195.63 * GB),),
        ),
        host_overhead_s=21.3e-6,
        net_efficiency=0.94,
    )
    sources = (
        _all("nccl-model", "link_Bps", "ll_max_Bps", "ll128_channel_Bps")
        | {"channels": "nccl-channels", "net_efficiency": "nccl-net", "host_overhead_s": "nccl-carried-hopper"}
        | _all("nccl-a100", "lines.ring/ll", "lines.ring/ll128", "lines.ring/simple", "lines.p2p/simple")
    )
    mechanisms = {
        "copy-engine": _mech(
            "copy-engine",
            276.9 * GB,
            "p2p-a100",
            "host-issued peer copies; no SMs; peak: the fastest pair of p2pBandwidthLatencyTest's P2P writes",
        ),
        "sm-load": _mech("sm-load", 240 * GB, "a100-link-eff", sm_note, ctas=76),
        "sm-store": _mech("sm-store", 240 * GB, "a100-link-eff", sm_note, ctas=76),
        "tma": _unavailable("no TMA before Hopper"),
        "multimem": _unavailable("the switches do no in-network reduction (no NVLS)"),
        "nccl": _nccl(tuning, sources),
    }
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
    gpu = _gpu(
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
        {},
        "l40s-datasheet",
    )
    note = "no L40S measurement published: RTX A6000s' PCIe Gen4 copies; latencies from the NVLink 2×H200 node"
    tuning = NcclTuning(
        version="2.27",
        channels=32,
        fabric="pcie",
        link_Bps=24 * GB,
        ll_max_Bps=87.7 * GB,
        host_overhead_s=21.3e-6,
        net_efficiency=0.94,
    )
    sources = _all("nccl-model", "link_Bps", "ll_max_Bps") | {"channels": "nccl-channels"}
    sources |= {"host_overhead_s": "nccl-carried-hopper", "net_efficiency": "nccl-net"}
    mechanisms = {
        "copy-engine": _mech("copy-engine", 26.34 * GB, "pcie-analog", note),
        "sm-load": _mech(
            "sm-load", 26.34 * GB, "pcie-analog", note + "; SM copies assumed to match them with 16 SMs", ctas=16
        ),
        "sm-store": _mech(
            "sm-store", 26.34 * GB, "pcie-analog", note + "; SM copies assumed to match them with 16 SMs", ctas=16
        ),
        "tma": _unavailable("no TMA before Hopper"),
        "multimem": _unavailable("the switches do no in-network reduction (no NVLS)"),
        "nccl": _nccl_unmeasured(tuning, sources),
    }
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


def _nccl_unmeasured(tuning: NcclTuning, sources: dict[str, str]) -> MechanismSpec:
    """NCCL where no run of it was published: priced by its own model alone (LL's first step, the ring's bus
    bandwidth)."""
    src = _all("nccl-model", "latency_s", "step_latency_s", "peak_bandwidth_Bps")
    src |= _all("nccl-channels", "per_cta_bandwidth_Bps", "num_ctas_default")
    return MechanismSpec(
        True,
        6.6e-6 + 1.0e-6,
        tuning.link_Bps,
        tuning.link_Bps / tuning.channels,
        tuning.channels,
        f"NCCL {tuning.version}: no run published on this machine, so its own tuning model picks and prices every call",
        1.0e-6,
        src,
        tuning=NcclSpec(tuning, sources),
    )


def _h200x2() -> Topology:
    """The 2×H200 test node as `pkroof probe` measured it (topology/data/h200x2.json; benchmarks/ has the runs)."""
    return load(H200X2)


PRESETS: dict[str, Callable[[], Topology]] = {
    "h200x2": _h200x2,
    "hgx-h100-8": _hgx_h100_8,
    "hgx-h200-8": _hgx_h200_8,
    "hgx-b200-8": _hgx_b200_8,
    "gb200-nvl72": _gb200_nvl72,
    "gb200-nvl576": _gb200_nvl576,
    "dgx-a100-8": _dgx_a100_8,
    "pcie-l40s-8": _pcie_l40s_8,
}


def preset(name: str) -> Topology:
    if name not in PRESETS:
        raise ValueError(f"unknown topology {name!r} (presets: {', '.join(PRESETS)}; or a JSON file path)")
    return PRESETS[name]()


def resolve(name_or_path: str, *, nodes: int | None = None) -> Topology:
    """A preset by name ("NAME@N": N of its nodes, as records of a launched job name it), else a topology JSON file;
    then `nodes` copies of it if asked."""
    looks_like_file = name_or_path.endswith(".json") or "/" in name_or_path or Path(name_or_path).is_file()
    base, _, count = name_or_path.partition("@")
    if not looks_like_file and base in PRESETS and count.isdigit() and int(count) >= 1:
        return preset(base).with_nodes(nodes if nodes is not None else int(count))
    topology = load(name_or_path) if looks_like_file else preset(name_or_path)
    if nodes is not None:
        if nodes < 1:
            raise ValueError(f"--nodes must be at least 1, got {nodes}")
        topology = topology.with_nodes(nodes)
    return topology
