"""The shared runtime: what the probe and the profiler both need, and nothing about problems or topologies.

launching ranks (launch.py), the one timing function (timing.py), the NVML boundary (nvml.py), the GPU-state
watch (gpu_state.py) and the PTX helpers pkroof's Triton kernels synchronise with (ptx.py).
"""
