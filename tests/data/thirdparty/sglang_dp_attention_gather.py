# From sgl-project/sglang python/sglang/srt/layers/dp_attention.py::_dp_gather_via_all_reduce (DpPaddingMode.SUM_LEN,
# chosen for extend batches over several DP ranks): each DP rank writes its tokens into its slot of a zeroed buffer of
# sum(global_num_tokens) rows (memcpy_triton), then tensor_model_parallel_all_reduce. Attention TP size 1; the DP
# ranks hold uneven prefill batches (rank r: tokens * (r + 1) / P, the last rank the most).
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, tokens=128, hidden=256):
    counts = [tokens * (r + 1) // world_size for r in range(world_size)]
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    local = torch.randn(counts[rank], hidden, generator=g, device=device, dtype=torch.bfloat16)
    return local, torch.tensor(counts, dtype=torch.int64, device=device)  # global_num_tokens


def reference(local, global_num_tokens):
    counts, rank = global_num_tokens.tolist(), dist.get_rank()
    start = sum(counts[:rank])
    buf = local.new_zeros(sum(counts), local.shape[1])
    buf[start : start + counts[rank]] = local
    dist.all_reduce(buf)
    return buf
