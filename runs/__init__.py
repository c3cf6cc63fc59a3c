"""A job's profiler traces: read, classify, size, match ranks, steps, exposed communication, opportunities."""
