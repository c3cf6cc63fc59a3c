"""A rank target whose module takes 3 s to import: in a rank that is start-up (before the process group), which
the launcher does not charge to the job's deadline."""

import time

time.sleep(3)


def rank_plus_one(rank: int, world: int) -> int:
    return rank + 1
