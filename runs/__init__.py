"""A job's profiler traces: read, classify and size every GPU kernel, bound it, match collectives across ranks,
break each step down, and rank what to hand-tune first (docs/trace.md)."""

from .analyze_traces import analyze_traces
from .result import SCHEMA, TraceResult, to_dict

__all__ = ["SCHEMA", "TraceResult", "analyze_traces", "to_dict"]
