# From vllm-project/vllm vllm/model_executor/layers/vocab_parallel_embedding.py::VocabParallelEmbedding.forward
# The vocabulary is padded to a multiple of 64 (pad_vocab_size, DEFAULT_VOCAB_PADDING_SIZE) before it is split, so
# each rank holds padded/P rows; get_masked_input_and_mask, the lookup, masked_fill_, tensor_model_parallel_all_reduce.
import torch
import torch.distributed as dist
import torch.nn.functional as nnf
from torch import nn


def inputs(rank, world_size, *, seed, device, tokens=64, vocab=1000, hidden=128, padding=64):
    padded = -(-vocab // padding) * padding
    if padded % world_size:
        raise ValueError(f"the padded vocabulary {padded} is not divisible by the world size {world_size}")
    meta = torch.device(device).type == "meta"
    g = None if meta else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    ids = torch.randint(0, vocab, (tokens,), generator=g, device=device)
    table = nn.Embedding(padded // world_size, hidden, device=device, dtype=torch.bfloat16)
    table.requires_grad_(False)
    table.org_vocab_size = vocab  # the unpadded size: rows past it are padding
    if not meta:
        table.weight.copy_(torch.randn(table.weight.shape, generator=g, device=device, dtype=torch.bfloat16))
    return ids, table


def reference(ids, table):
    start = dist.get_rank() * table.num_embeddings
    end = min(start + table.num_embeddings, table.org_vocab_size)
    mine = (ids >= start) & (ids < end)
    local = nnf.embedding(mine * (ids - start), table.weight)
    local = local.masked_fill(~mine.unsqueeze(-1), 0)
    dist.all_reduce(local)
    return local
