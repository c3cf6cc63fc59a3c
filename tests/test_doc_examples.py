"""The docs' examples run as a user runs them: each Python block of the README, docs/api.md and docs/problems.md written
to a file and run as a script (`python example.py`, no `if __name__ == "__main__":` guard, as written), and
problems.md's command lines run on its own problem file, each in a fresh folder.

Where an example would take minutes on CPU ranks, one argument is made smaller and the test says which (SMALLER):
the code around it runs as written."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
TRACES = Path(__file__).parent / "data" / "runs" / "hta_two_ranks"  # a two-rank job's traces, for `traces/`
# (document, text in its example) → the smaller text run here, and why
SMALLER = {
    ("README.md", '"64MiB"'): ('"1MiB"', "a 64 MiB all-reduce on 2 CPU ranks, 20 samples and its checks: minutes"),
    ("docs/api.md", '"64MiB"'): ('"1MiB"', "a 64 MiB all-reduce on 2 CPU ranks, 20 samples and its checks: minutes"),
    ("docs/problems.md", "tokens=1024"): ("tokens=64", "bf16 gloo ranks reduce 8 MiB slowly on a busy machine"),
}


def _blocks(document: str, language: str) -> list[str]:
    text = (ROOT / document).read_text()
    found = re.findall(rf"```{language}\n(.*?)```", text, re.S)
    for (doc, old), (new, _) in SMALLER.items():
        if doc == document:
            found = [block.replace(old, new) for block in found]
    return found


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PKROOF_TOPOLOGY"} | {"PYTHONWARNINGS": "ignore"}
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _script(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    (tmp_path / "example.py").write_text(code)
    return _run([sys.executable, "example.py"], tmp_path)


EXAMPLES = [(doc, i) for doc in ("README.md", "docs/api.md") for i in range(len(_blocks(doc, "python")))]


@pytest.mark.parametrize(("document", "number"), EXAMPLES, ids=[f"{d}-{i}" for d, i in EXAMPLES])
def test_a_python_example_runs_as_a_script(document, number, tmp_path):
    code = _blocks(document, "python")[number]
    if "pkroof.profile(" in code:
        pytest.importorskip("torch")  # the profiler's CPU ranks
    if "pkroof.trace(" in code:
        pytest.importorskip("pandas")
        shutil.copytree(TRACES, tmp_path / "traces")
    done = _script(tmp_path, code)
    assert "Traceback" not in done.stderr
    if "pkroof.profile(" in code:
        assert (
            tmp_path / (re.search(r'out="([^"]+)"', code) or [None, "pkroof-results"])[1] / "results.jsonl"
        ).is_file()


def test_the_api_pages_printed_output_is_what_its_first_example_prints(tmp_path):
    """docs/api.md shows what its first block prints: the same lines come out (model output, no GPU involved)."""
    text = (ROOT / "docs" / "api.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    printed = re.search(r"\nprinted, with [^\n]*\n\n```\n(.*?)```", text, re.S).group(1)
    assert _script(tmp_path, code).stdout == printed


@pytest.fixture(scope="module")
def problem_folder(tmp_path_factory) -> Path:
    """docs/problems.md's problem file, as the file its first line names, and an implementation file for `profile`."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("problems-md")
    (code,) = [b for b in _blocks("docs/problems.md", "python") if b.startswith("# my_all_reduce.py")]
    (folder / "my_all_reduce.py").write_text(code)
    reference = code[code.index("def reference") :].replace("def reference", "def fast")
    (folder / "mine.py").write_text("import torch.distributed as dist\n\n\n" + reference)
    return folder


COMMANDS = [
    line.split("#")[0].split()
    for block in _blocks("docs/problems.md", "bash")
    for line in block.splitlines()
    if line.startswith("pkroof ")
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[1] for c in COMMANDS])
def test_a_problem_files_command_runs_as_documented(command, problem_folder):
    pkroof = shutil.which("pkroof", path=str(Path(sys.executable).parent)) or "pkroof"
    done = _run([pkroof, *command[1:]], problem_folder)
    assert "my-all-reduce" in done.stdout or "my_all_reduce" in done.stdout
    if command[1] == "profile":
        assert re.search(r"mine\.py:fast\s.*\bcorrect\b", done.stdout), done.stdout


def test_every_doc_example_is_run_here():
    """A new block in these documents is run by this file (a block in another language is named here)."""
    assert len(_blocks("README.md", "python")) == 1
    assert len(_blocks("docs/api.md", "python")) == 3  # bound/advise/sizes, profile, trace
    assert len(_blocks("docs/problems.md", "python")) == 1 and len(COMMANDS) == 3
    for document, old in SMALLER:  # each substitution still finds its text
        assert old in (ROOT / document).read_text(), (document, old)
