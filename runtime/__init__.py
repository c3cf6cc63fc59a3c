"""The shared runtime: what the probe and the profiler both need, and nothing about problems or topologies.

launching ranks (launch.py) and keeping their processes in hand (process_tree.py), a function in a process of its own
under a deadline (isolated.py) or in this one (deadline.py), ranks launched by torchrun or srun (launched.py), the
one timing function (timing.py), the NVML boundary (nvml.py), the GPU-state watch (gpu_state.py) and the PTX helpers
pkroof's Triton kernels synchronise with (ptx.py).
"""
