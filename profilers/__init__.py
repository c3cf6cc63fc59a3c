"""Measuring: each (problem, implementation) as a job on ranks of its own, checked against the reference before and
while it is timed, recorded as it goes. profile.py runs the command (`pkroof profile`); run.py runs one job on fresh
ranks into a record; implementations.py resolves what runs, checks.py judges its outputs, sampling.py times it;
across_nodes.py runs jobs on ranks torchrun or srun launched; calibrate.py fits a topology's fixed costs to profiled
kernels."""
