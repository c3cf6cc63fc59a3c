"""What runs: the problem files of the suite (problems/, one file each: a torch-free spec and a torch reference) and
pkroof's own implementations (Triton kernels over symmetric memory, copy-engine collectives, the fast paths PyTorch
ships), each declaring the (mechanism, schedule) pair it is (declare.py, registry.py)."""
