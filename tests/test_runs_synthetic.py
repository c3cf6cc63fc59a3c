"""pkroof trace on Kineto traces made here (tests/runs_traces.py), kernels at chosen times: the step breakdown's
unions, exposed communication, matching across ranks, CUDA-graph kernels, sizing and roofs, the topology chosen.
Every expected value is derived below from the listed intervals and shapes."""

import math

import pytest
from runs_traces import Synthetic, nccl_args

import pkroof
from pkroof.rooflines.builders import gemm
from pkroof.runs import analyze_traces
from pkroof.topology import preset

AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
SGEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"


def _one_step(tmp_path):
    """Step 1 on rank 0 of 2: gemm [100, 400), all-reduce [300, 600), elementwise [500, 550), memcpy [700, 750),
    all-reduce [800, 900) (µs)."""
    t = Synthetic(rank=0, world=2)
    t.step(1, 0, 1000)
    t.kernel(SGEMM, 100, 300, op="aten::mm", dims=[[4096, 8192], [8192, 2048]], types=["c10::BFloat16"] * 2)
    t.kernel(AR, 300, 300, stream=20, args=nccl_args("allreduce", 2**24, "BFloat16", [0, 1]))
    t.kernel("void at::native::vectorized_elementwise_kernel<4>", 500, 50, op="aten::add")
    t.kernel("Memcpy DtoD (Device -> Device)", 700, 50, cat="gpu_memcpy")
    t.kernel(AR, 800, 100, stream=20, args=nccl_args("allreduce", 2**20, "BFloat16", [0, 1]))
    return t.write(tmp_path / "rank0.json")


def test_a_step_is_broken_into_unions_of_its_kernels(tmp_path):
    r = analyze_traces(_one_step(tmp_path), topology="hgx-h100-8")
    (step,) = r.steps.to_dict("records")
    wall = 900 - 100  # first kernel start to last kernel end
    compute = (400 - 100) + (550 - 500)  # gemm ∪ elementwise; the memcpy is neither compute nor communication
    comm = (600 - 300) + (900 - 800)
    exposed = (500 - 400) + (600 - 550) + (900 - 800)  # all-reduce time no compute kernel covers
    busy = (600 - 100) + (750 - 700) + (900 - 800)  # every kernel, the memcpy included
    assert step["step"] == 1
    assert step["wall_s"] == pytest.approx(wall * 1e-6)
    assert step["compute_s"] == pytest.approx(compute * 1e-6)
    assert step["communication_s"] == pytest.approx(comm * 1e-6)
    assert step["exposed_communication_s"] == pytest.approx(exposed * 1e-6)
    assert step["idle_s"] == pytest.approx((wall - busy) * 1e-6)


def test_a_collective_is_sized_from_its_arguments_and_bounded_as_pkroof_bound_bounds_it(tmp_path):
    r = analyze_traces(_one_step(tmp_path), topology="hgx-h100-8")
    ar = r.kernels[r.kernels["name"] == AR].iloc[0]
    size = 2**24 * 2  # In msg nelems × 2 B (bf16): the buffer, nccl-tests' all-reduce size
    n = 2
    assert (ar["collective"], ar["bytes"], ar["dtype"], ar["group_size"], ar["group"]) == (
        "all_reduce",
        size,
        "bf16",
        2,
        "0,1",
    )
    assert ar["busbw_GBps"] == pytest.approx(size / 300e-6 * 2 * (n - 1) / n / 1e9)
    b = pkroof.bound("all-reduce", topology="hgx-h100-8", world_size=2, size=size)
    nccl = next(p for p in b.predictions if p.mechanism == "nccl" and p.schedule == "serial")
    assert ar["t_roof_s"] == pytest.approx(b.t_roof_s)
    assert ar["t_nccl_s"] == pytest.approx(nccl.t_s)
    assert ar["fraction_of_roof"] == pytest.approx(b.t_roof_s / 300e-6)


def test_a_gemm_is_sized_from_its_operators_shapes(tmp_path):
    r = analyze_traces(_one_step(tmp_path), topology="hgx-h100-8")
    g = r.kernels[r.kernels["category"] == "gemm"].iloc[0]
    m, n, k = 4096, 2048, 8192  # aten::mm(a[4096, 8192], b[8192, 2048])
    assert (g["gemm_m"], g["gemm_n"], g["gemm_k"], g["gemm_batch"], g["dtype"]) == (m, n, k, 1, "bf16")
    assert g["flops"] == 2 * m * n * k
    compute_s = 2 * m * n * k / 989.4e12  # H100 SXM dense bf16 peak
    hbm_s = 2 * (m * k + k * n + m * n) / 3.35e12  # A, B, C once at the HBM peak
    assert g["t_roof_s"] == pytest.approx(max(compute_s, hbm_s))
    assert g["fraction_of_roof"] == pytest.approx(max(compute_s, hbm_s) / 300e-6)


def test_an_fp32_gemm_is_bounded_at_the_tf32_peak_cublas_may_run_it_at(tmp_path):
    t = Synthetic(rank=0, world=1)
    t.kernel("ampere_sgemm_128x64_tn", 10, 50, op="aten::mm", dims=[[1024, 1024], [1024, 1024]], types=["float"] * 2)
    r = analyze_traces(t.write(tmp_path / "r.json"), topology="hgx-h100-8")
    g = r.kernels.iloc[0]
    w = gemm(1024, 1024, 1024, "tf32")
    expect = max(w.compute[0].flops / 494.7e12, w.hbm_bytes / 3.35e12)  # H100 tf32 dense peak; fp32 bytes
    assert g["t_roof_s"] == pytest.approx(expect)


def _two_ranks(tmp_path):
    """Two all-reduces on ranks 0 and 1 (µs): the first at [100, 150) and [130, 155), the second at [300, 310) and
    [320, 330)."""
    paths = []
    for rank, spans in ((0, [(100, 50), (300, 10)]), (1, [(130, 25), (320, 10)])):
        t = Synthetic(rank=rank, world=2)
        t.step(7, 0, 1000)
        for start, dur in spans:
            t.kernel(AR, start, dur, stream=20, args=nccl_args("allreduce", 2**20, "BFloat16", [0, 1]))
        paths.append(t.write(tmp_path / f"rank{rank}.json", gz=rank == 1))
    return paths


def test_collectives_are_matched_across_ranks_and_split_into_transfer_and_waiting(tmp_path):
    r = analyze_traces(_two_ranks(tmp_path), topology="hgx-h100-8")
    first, second = r.collectives.sort_values("seq").to_dict("records")
    assert (first["group"], first["seq"], first["ranks"], first["last_rank"]) == ("0,1", 0, "0,1", 1)
    transfer = 150 - 130  # the earliest end minus the last start
    assert first["transfer_s"] == pytest.approx(transfer * 1e-6)
    assert first["wait_s"] == pytest.approx((50 - transfer) * 1e-6)  # the longest kernel's rest
    assert (first["start_us_first"], first["start_us_last"]) == (100, 130)
    # the second: rank 0 ended (310) before rank 1 started (320): no transfer overlapped, all its 10 µs waiting
    assert second["transfer_s"] == 0
    assert second["wait_s"] == pytest.approx(10e-6)
    assert second["last_rank"] == 1


def test_ranks_steps_and_files_come_back(tmp_path):
    r = analyze_traces([str(p) for p in _two_ranks(tmp_path)], topology="hgx-h100-8")
    assert r.ranks == [0, 1]
    assert sorted(zip(r.steps["rank"], r.steps["step"], strict=True)) == [(0, 7), (1, 7)]
    assert not r.notes


def test_a_folder_and_a_glob_name_the_same_ranks(tmp_path):
    _two_ranks(tmp_path)
    by_folder = analyze_traces(tmp_path, topology="hgx-h100-8")
    by_glob = analyze_traces(str(tmp_path / "rank*"), topology="hgx-h100-8")
    assert by_folder.ranks == by_glob.ranks == [0, 1]


def test_cuda_graph_kernels_take_their_step_from_the_graph_launch(tmp_path):
    t = Synthetic(rank=0, world=2)
    t.step(3, 0, 100)
    t.step(4, 100, 200)
    corr = t.graph_launch(150)
    t.kernel(SGEMM, 210, 40, graph=corr)
    t.kernel(AR, 260, 30, stream=20, graph=corr, args=nccl_args("allreduce", 2**20, "BFloat16", [0, 1]))
    r = analyze_traces(t.write(tmp_path / "r.json"), topology="hgx-h100-8")
    g, ar = r.kernels.sort_values("start_us").to_dict("records")
    assert g["step"] == ar["step"] == 4  # launched at 150 µs, inside ProfilerStep#4, though run after it
    assert g["op"] is None
    assert g["unsized"] == "launched from a CUDA graph: no operator shapes"
    assert ar["bytes"] == 2**20 * 2  # a graph's NCCL kernel still carries its own arguments
    assert r.unsized == {"launched from a CUDA graph: no operator shapes": 1}


def test_the_topology_is_matched_from_device_properties_and_world_size(tmp_path):
    paths = []
    for rank in (0, 1):
        t = Synthetic(rank=rank, world=16)
        t.kernel(AR, 10, 5, args=nccl_args("allreduce", 1024, "Float", list(range(16))))
        paths.append(t.write(tmp_path / f"rank{rank}.json"))
    r = analyze_traces(paths)
    assert r.topology == "hgx-h100-8@2"
    assert "'NVIDIA H100 80GB HBM3' with 132 SMs" in r.topology_reason and "2 nodes of 8" in r.topology_reason
    assert r.notes[0].startswith("partial result: 2 of 16 ranks")


def test_a_gpu_is_matched_by_its_exact_name_h20_is_not_h200(tmp_path):
    t = Synthetic(rank=0, world=1, device={"name": "NVIDIA H20", "numSms": 78})
    t.kernel(SGEMM, 10, 5)
    with pytest.raises(ValueError, match=r"no preset has the traces' GPU 'NVIDIA H20' with 78 SMs.*--topology"):
        analyze_traces(t.write(tmp_path / "r.json"))


def test_a_collective_group_across_nodes_is_bounded_on_the_network(tmp_path):
    # ranks 0 and 8 of a 16-rank job on 8-GPU nodes: one per node, so the bound crosses the NICs
    t = Synthetic(rank=0, world=16)
    t.kernel(AR, 10, 500, args=nccl_args("allreduce", 2**24, "BFloat16", [0, 8]))
    r = analyze_traces(t.write(tmp_path / "r.json"), topology="hgx-h100-8")
    across = r.kernels.iloc[0]["t_roof_s"]
    system = preset("hgx-h100-8").with_nodes(2).system(2, 1)
    from pkroof.rooflines import Collective, bound
    from pkroof.rooflines.builders import collective

    assert across == pytest.approx(bound(collective(Collective.ALL_REDUCE, 2, "bf16", size=2**25), system).t_roof_s)
    inside = pkroof.bound("all-reduce", topology="hgx-h100-8", world_size=2, size=2**25).t_roof_s
    assert across > inside


def test_no_measured_kernel_is_left_above_its_roof_unreported(tmp_path):
    # a 1 µs all-reduce of 32 MiB would beat any roof: it is shown as it is (fraction above 1), never clamped
    t = Synthetic(rank=0, world=2)
    t.kernel(AR, 10, 1, args=nccl_args("allreduce", 2**24, "BFloat16", [0, 1]))
    r = analyze_traces(t.write(tmp_path / "r.json"), topology="hgx-h100-8")
    assert r.kernels.iloc[0]["fraction_of_roof"] > 1
    assert not math.isnan(r.kernels.iloc[0]["t_roof_s"])


def test_a_trace_without_profiler_steps_is_one_step_of_all_its_kernels(tmp_path):
    t = Synthetic(rank=0, world=1)
    t.kernel(SGEMM, 10, 5)
    t.kernel(SGEMM, 30, 5)
    r = analyze_traces(t.write(tmp_path / "r.json"), topology="hgx-h100-8")
    (step,) = r.steps.to_dict("records")
    assert step["step"] is None
    assert step["wall_s"] == pytest.approx((35 - 10) * 1e-6)
    assert step["compute_s"] == pytest.approx(10e-6)
