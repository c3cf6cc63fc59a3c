"""Make the one-GPU trace in this folder: torch.profiler (CPU + CUDA, record_shapes) over 4 steps of bf16 GEMMs
(mm, addmm via linear, bmm), scaled-dot-product attention, elementwise work, a CUDA-graph replay of a small MLP, and
an all-reduce in a one-rank NCCL group; ProfilerStep#N spans from a schedule of 1 wait, 1 warm-up, 2 active steps.

    python3 make_trace.py OUT_DIR       # on a machine with one NVIDIA GPU
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812
from torch.profiler import ProfilerActivity, profile, schedule

out = sys.argv[1]
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29511")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
dev = torch.device("cuda:0")
bf16 = torch.bfloat16
a, b = torch.randn(4096, 8192, device=dev, dtype=bf16), torch.randn(8192, 2048, device=dev, dtype=bf16)
x, w = torch.randn(8, 512, 4096, device=dev, dtype=bf16), torch.randn(4096, 4096, device=dev, dtype=bf16)
bias = torch.randn(4096, device=dev, dtype=bf16)
p, q = torch.randn(32, 1024, 128, device=dev, dtype=bf16), torch.randn(32, 128, 1024, device=dev, dtype=bf16)
qkv = [torch.randn(4, 16, 2048, 128, device=dev, dtype=bf16) for _ in range(3)]
g = torch.randn(1 << 24, device=dev, dtype=bf16)

mlp_in = torch.randn(256, 1024, device=dev, dtype=bf16)
w1, w2 = torch.randn(4096, 1024, device=dev, dtype=bf16), torch.randn(1024, 4096, device=dev, dtype=bf16)
stream = torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(stream):
    for _ in range(3):
        F.linear(F.gelu(F.linear(mlp_in, w1)), w2)
torch.cuda.current_stream().wait_stream(stream)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    mlp_out = F.linear(F.gelu(F.linear(mlp_in, w1)), w2)


def step():
    c = a @ b
    y = F.linear(x, w, bias)
    z = torch.bmm(p, q)
    o = F.scaled_dot_product_attention(*qkv, is_causal=True)
    graph.replay()
    dist.all_reduce(g)
    return (c.float().sum() + y.float().mean() + z.float().mean() + o.float().mean() + mlp_out.float().mean()).item()


for _ in range(2):
    step()
torch.cuda.synchronize()
with profile(
    activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
    record_shapes=True,
    schedule=schedule(wait=1, warmup=1, active=2),
    on_trace_ready=lambda prof: prof.export_chrome_trace(os.path.join(out, "rank0.json.gz")),
) as prof:
    for _ in range(4):
        step()
        prof.step()
dist.destroy_process_group()
print(torch.__version__, torch.cuda.get_device_name(0), torch.cuda.nccl.version())
