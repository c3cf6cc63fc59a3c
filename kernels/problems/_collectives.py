"""torch.distributed's tensor collectives under the names of the torch at hand (a leading underscore keeps this out
of `pkroof problems`). torch 2.13 renamed all_gather_into_tensor and reduce_scatter_tensor, the names Megatron,
FSDP2 and DeepSpeed call (they now warn), to all_gather_single and reduce_scatter_single."""


def all_gather_into_tensor(output, input, **kwargs):
    import torch.distributed as dist

    return getattr(dist, "all_gather_single", dist.all_gather_into_tensor)(output, input, **kwargs)


def reduce_scatter_tensor(output, input, **kwargs):
    import torch.distributed as dist

    return getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)(output, input, **kwargs)
