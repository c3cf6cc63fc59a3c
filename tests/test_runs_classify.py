"""What a kernel is and how big, from its name, its recorded arguments and its operator's shapes: each expected
value derived here from the shapes and element sizes."""

import pytest

from pkroof.runs.classify import (
    CommSize,
    category_of,
    collective_of_arg,
    collective_of_name,
    size_collective,
    size_gemm,
)
from pkroof.runs.read import Kernel, Op, _CommArgs


def _kernel(name: str, kind: str = "kernel", comm: _CommArgs | None = None) -> Kernel:
    return Kernel(kind, name, 0.0, 1.0, 7, 1, 0, 1, comm)


def _op(name: str, dims: list, types: list) -> Op:
    return Op.of(name, dims, types)


@pytest.mark.parametrize(
    ("name", "op", "category"),
    [
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", None, "communication"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", None, "communication"),
        ("nvjet_tst_192x192_64x4_2x1_v_bz_coopA_NTN", "aten::mm", "gemm"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "aten::mm", "gemm"),
        ("ampere_sgemm_128x64_tn", "aten::addmm", "gemm"),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align4>(Params)", "aten::mm", "gemm"),
        ("triton_tem_fused_mm_0", None, "gemm"),
        ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32", "aten::cudnn_convolution", "other"),
        ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)", None, "memory"),
        ("void epilogue::impl::globalKernel<float, float, float, true, true>(int, cublasLtEpilogue_t)", None, "memory"),
        ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)", None, "attention"),
        ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel)", None, "attention"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", None, "attention"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", None, "memory"),
        ("triton_red_fused_native_layer_norm_0", None, "memory"),
        ("some_custom_kernel", "aten::mm", "gemm"),  # a name of no family, launched by a matmul
        ("some_custom_kernel", "aten::relu", "other"),
        # a mangled cuDNN/CUTLASS convolution whose template arguments name an epilogue: a convolution, not memory
        (
            "void cutlass_cudnn_train::Kernel<_ZN19cutlass_cudnn_train4conv6kernel23ImplicitGemmConvolutionINS_4gemm"
            "11threadblock15ImplicitGemmMultistageENS_8epilogue11threadblock8EpilogueE>(Params)",
            "aten::cudnn_convolution",
            "other",
        ),
        # a CUTLASS GEMM kernel a convolution operator launched is that convolution's implicit GEMM
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)",
            "aten::convolution_backward",
            "other",
        ),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)", "aten::mm", "gemm"),
        # cuDNN's batch norms are norms: memory
        ("void cudnn::bn_fw_tr_1C11_singleread_spec<float, 512, true, 1, 2, 0>(cudnnTensorStruct)", None, "memory"),
        ("void cudnn::bn_bw_1C11_singleread_spec<float, 512, true, 1, 2, 0>(cudnnTensorStruct)", None, "memory"),
    ],
)
def test_a_kernel_is_classified_by_its_name_and_operator(name, op, category):
    assert category_of(_kernel(name), op) == category


def test_copies_and_memsets_keep_their_own_category():
    assert category_of(_kernel("Memcpy DtoD (Device -> Device)", kind="copy"), None) == "copy"
    assert category_of(_kernel("Memset (Device)", kind="memset"), None) == "memset"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "reduce_scatter"),
        ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)", "broadcast"),
        ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "send_recv"),
        ("ncclKernel_Reduce_RING_LL_Sum_float(ncclWorkElem)", "reduce"),
        ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", None),
    ],
)
def test_the_collective_in_an_nccl_kernels_name(name, kind):
    assert collective_of_name(name) == kind


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("allreduce", "all_reduce"),
        ("_allgather_base", "all_gather"),
        ("allgather_into_tensor_coalesced", "all_gather"),
        ("c10d::_reduce_scatter_base_", "reduce_scatter"),
        ("c10d::alltoall_base_", "all_to_all"),
        ("all_to_allv", "all_to_all"),
        ("nccl:all_reduce", "all_reduce"),
        ("c10d::recv_", "recv"),
        ("barrier", "all_reduce"),
        ("c10d::monitored_barrier_", None),
    ],
)
def test_pytorchs_collective_names(text, kind):
    assert collective_of_arg(text) == kind


def _args(collective: str, n_in: int, n_out: int, dtype: str, ranks: str) -> _CommArgs:
    return _CommArgs(collective, n_in, n_out, None, dtype, "[]", "[]", "7", ranks)


@pytest.mark.parametrize(
    ("collective", "n_in", "n_out", "dtype", "expected_bytes"),
    [
        ("allreduce", 1000, 1000, "BFloat16", 1000 * 2),  # the buffer
        ("_allgather_base", 250, 1000, "Float", 1000 * 4),  # the gathered output
        ("reduce_scatter_tensor", 1000, 250, "Half", 1000 * 2),  # the full input
        ("all_to_allv", 1000, 1000, "Long", 1000 * 8),  # what one rank sends in all
        ("broadcast", 64, 64, "Byte", 64),
    ],
)
def test_a_collective_is_sized_in_nccl_tests_convention(collective, n_in, n_out, dtype, expected_bytes):
    k = _kernel("ncclDevKernel_Generic", comm=_args(collective, n_in, n_out, dtype, "[0, 1, 2, 3]"))
    size = size_collective(k, None, None, None, graph=False)
    assert (size.bytes, size.group_size, size.group, size.unsized) == (expected_bytes, 4, "0,1,2,3", None)


def test_a_collective_of_an_unknown_dtype_is_unsized_and_says_why():
    k = _kernel("ncclDevKernel_Generic", comm=_args("allreduce", 10, 10, "ComplexFloat", "[0, 1]"))
    assert size_collective(k, None, None, None, graph=False).unsized == "dtype 'ComplexFloat' not recorded or not known"


def test_a_send_recv_kernel_without_arguments_is_not_guessed():
    k = _kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)")
    size = size_collective(k, None, None, ("0,1", 2), graph=False)
    assert size == CommSize("send_recv", unsized=size.unsized) and "send, recv or all-to-all" in size.unsized


@pytest.mark.parametrize(
    ("op", "dims", "types", "expected_bytes"),
    [
        ("c10d::_allgather_base_", [[8, 1024], [2, 1024]], ["c10::BFloat16"] * 2, 8 * 1024 * 2),  # output: gathered
        ("c10d::_reduce_scatter_base_", [[2, 1024], [8, 1024]], ["float"] * 2, 8 * 1024 * 4),  # input: the full one
        ("c10d::alltoall_base_", [[4096], [4096], [], []], ["long", "long", "", ""], 4096 * 8),  # input: all sent
        ("c10d::allreduce_", [[[1024, 16], [512]], [], [], []], ["c10::Half", "", "", ""], (1024 * 16 + 512) * 2),
    ],
)
def test_a_collective_without_arguments_is_sized_from_its_c10d_operator(op, dims, types, expected_bytes):
    size = size_collective(_kernel("ncclKernel_Generic"), _op(op, dims, types), None, ("0,1,2,3", 4), graph=False)
    assert (size.bytes, size.group_size, size.unsized) == (expected_bytes, 4, None)


def test_an_operator_without_a_group_leaves_the_collective_unsized():
    op = _op("c10d::allreduce_", [[[1024]], [], [], []], ["float", "", "", ""])
    size = size_collective(_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"), op, None, None, graph=False)
    assert size.unsized == "no group recorded (several process groups, none named)"


@pytest.mark.parametrize(
    ("op", "dims", "types", "bmnk", "dtype"),
    [
        ("aten::mm", [[4096, 8192], [8192, 2048]], ["c10::BFloat16"] * 2, (1, 4096, 2048, 8192), "bf16"),
        ("aten::addmm", [[2048], [4096, 8192], [8192, 2048]], ["c10::Half"] * 3, (1, 4096, 2048, 8192), "fp16"),
        ("aten::bmm", [[32, 1024, 128], [32, 128, 1024]], ["float"] * 2, (32, 1024, 1024, 128), "fp32"),
        ("aten::baddbmm", [[32, 64, 64], [32, 64, 16], [32, 16, 64]], ["float"] * 3, (32, 64, 64, 16), "fp32"),
        (
            "aten::linear",
            [[8, 512, 4096], [1024, 4096], [1024]],
            ["c10::BFloat16"] * 3,
            (1, 8 * 512, 1024, 4096),
            "bf16",
        ),
        ("aten::matmul", [[4, 1, 64, 32], [3, 32, 16]], ["float"] * 2, (4 * 3, 64, 16, 32), "fp32"),  # broadcast
    ],
)
def test_a_gemms_flops_come_from_its_operators_shapes(op, dims, types, bmnk, dtype):
    size = size_gemm(_op(op, dims, types), graph=False, gemm_kernels_of_op=1)
    batch, m, n, k = bmnk
    assert (size.batch, size.m, size.n, size.k, size.dtype) == (batch, m, n, k, dtype)
    assert size.flops == 2 * batch * m * n * k


def test_a_gemm_without_shapes_or_of_two_kernels_is_unsized_and_says_why():
    assert size_gemm(_op("aten::mm", [], []), graph=False, gemm_kernels_of_op=1).unsized == (
        "aten::mm without Input Dims (record_shapes off)"
    )
    two = size_gemm(_op("aten::mm", [[4, 4], [4, 4]], ["float"] * 2), graph=False, gemm_kernels_of_op=2)
    assert two.unsized == "aten::mm launched 2 GEMM kernels"
    assert size_gemm(None, graph=True, gemm_kernels_of_op=0).unsized == "launched from a CUDA graph: no operator shapes"
