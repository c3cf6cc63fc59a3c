# From vllm-project/vllm vllm/distributed/parallel_state.py::GroupCoordinator.broadcast_tensor_dict: the driver
# (src 0) broadcasts the model input tensors one async torch.distributed.broadcast each and waits on all of them;
# the other ranks allocate empty tensors from the metadata and receive. The metadata's broadcast_object (pickled,
# on the CPU group) is left out: shapes come from inputs() here.
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, tokens=256, batch=8, max_blocks=32, vocab=32000):
    g = None if torch.device(device).type == "meta" else torch.Generator(device=device).manual_seed(seed * 1000 + rank)
    input_ids = torch.randint(0, vocab, (tokens,), generator=g, device=device)
    positions = torch.randint(0, 4096, (tokens,), generator=g, device=device)
    slot_mapping = torch.randint(0, 1 << 20, (tokens,), generator=g, device=device)
    block_tables = torch.randint(0, 1 << 16, (batch, max_blocks), generator=g, device=device, dtype=torch.int32)
    return input_ids, positions, slot_mapping, block_tables  # on ranks other than 0 only their shapes matter


def reference(input_ids, positions, slot_mapping, block_tables):
    src = 0
    mine = dist.get_rank() == src
    outs = [t.clone() if mine else torch.empty_like(t) for t in (input_ids, positions, slot_mapping, block_tables)]
    handles = [dist.broadcast(t, src=src, async_op=True) for t in outs if t.numel()]
    for h in handles:
        h.wait()
    return tuple(outs)
