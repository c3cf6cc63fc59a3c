"""What `pkroof trace --out DIR` writes: a problem file for each of the top opportunities (DIR/problems/), the
result as JSON with their paths (DIR/trace.json, --json's document) and the page (DIR/trace.html)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pkroof.reports.trace_page import write_trace_page
from pkroof.rooflines.export import finite
from pkroof.runs import problem_files
from pkroof.runs.result import TraceResult, to_dict


def write_out(result: TraceResult, out_dir: Path, *, top: int = problem_files.TOP) -> TraceResult:
    """Write DIR/problems/top<i>_<kind>.py for the first `top` opportunities, DIR/trace.json and DIR/trace.html;
    the result again, its opportunities' problem_file set."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with_files = problem_files.write(result.opportunities, out, top=top, topology=result.topology)
    result = dataclasses.replace(result, opportunities=with_files)
    document = json.dumps(finite(to_dict(result)), indent=2, allow_nan=False)
    (out / "trace.json").write_text(document + "\n", encoding="utf-8")
    write_trace_page(result, out)
    return result
