"""`pkroof trace ... --out DIR`: the problem files of the top opportunities, trace.json naming them, trace.html
linking them; the files are what `pkroof bound` takes."""

import json

from trace_frames import two_rank_job
from typer.testing import CliRunner

from pkroof.cli import app


def test_out_writes_the_problem_files_the_json_and_the_page(tmp_path):
    files = [str(f) for f in two_rank_job(tmp_path)]
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["trace", *files, "--topology", "hgx-h100-8", "--out", str(out)])
    assert done.exit_code == 0, done.output
    document = json.loads((out / "trace.json").read_text())
    written = [o["problem_file"] for o in document["opportunities"] if o["problem_file"]]
    # the job's three opportunities (the all-reduce far below its roof, the reduce-scatter, the GEMM with it): ≤ 5
    assert len(written) == len(document["opportunities"]) == 3
    page = (out / "trace.html").read_text()
    for path in written:
        assert f'href="problems/{path.rpartition("/")[2]}"' in page
        bound = CliRunner().invoke(app, ["bound", path, "--topology", "hgx-h100-8", "--json"])
        assert bound.exit_code == 0, bound.output
    assert (out / "plotly.min.js").is_file()
    assert f"[{written[0]}]" in done.output  # the terminal summary names each file


def test_the_streamed_json_is_the_documents_to_dict(tmp_path, monkeypatch):
    import io

    from pkroof import trace_out
    from pkroof.cli import strict_json
    from pkroof.runs import analyze_traces
    from pkroof.runs.result import to_dict

    result = analyze_traces(two_rank_job(tmp_path), topology="hgx-h100-8")
    monkeypatch.setattr(trace_out, "CHUNK", 7)  # several chunks of the job's 30 kernels
    written = io.BytesIO()
    trace_out.write_json(result, written)
    assert json.loads(written.getvalue()) == json.loads(strict_json(to_dict(result)))
