"""What to hand-tune first: the opportunities of a job, ranked by the time pkroof's model says they would save.

Filled by the opportunities module (issue 34, item 6): until then `find` returns the frame's columns and no rows.
"""

from __future__ import annotations

import pandas as pd

from pkroof.topology import Topology

from .result import TraceResult

COLUMNS = ["what", "kernels", "measured_s", "predicted_s", "saving_s", "mechanism", "schedule", "problem_file", "rank"]


def find(result: TraceResult, topology: Topology) -> pd.DataFrame:
    """The opportunities of `result` on `topology`, ranked by saving_s descending (COLUMNS). Filled by the
    opportunities module; for now an empty frame of its columns."""
    return pd.DataFrame(columns=COLUMNS)
