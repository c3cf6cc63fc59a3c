"""A problem × a topology → a result: the problem contract and catalogue (catalogue.py), a user's file read once
from its source (source.py) and analysed where it is safe to (user_file.py: here, or apart under a deadline),
tracing a reference into a Workload (trace.py: recorder.py, c10d_ops.py, trace_shims.py), the trace cache
(trace_cache.py), and the analysis that calls the model's one `analyze` (problem.py; imported runs:
imported_runs.py)."""
