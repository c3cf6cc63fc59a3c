"""A problem × a topology → a result: loading problem files (the suite's and a user's), tracing a reference into a
Workload (on meta tensors or CPU ranks), the trace cache, isolating a user's file with a deadline, and calling the
model's one `analyze` (rooflines/analyze.py)."""
