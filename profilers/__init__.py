"""Spawning ranks, checking correctness and timing (arrives with the profiler issue)."""
