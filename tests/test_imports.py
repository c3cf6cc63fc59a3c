"""The house's one-way flow, read from the code: which room may import which, and no import cycle between files.

Rooms are the package's folders (ARCHITECTURE.md). Every import counts, a function's own included: a cycle broken
by importing inside a function is still a cycle.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = {  # folder → the package under which it installs (pyproject.toml)
    "rooflines": "pkroof.rooflines",
    "runtime": "pkroof.runtime",
    "topology": "pkroof.topology",
    "kernels": "pkroof.kernels",
    "profilers": "pkroof.profilers",
    "reports": "pkroof.reports",
    "runs": "pkroof.runs",
    "pkroof": "pkroof",
}
# which of pkroof's rooms each room may import (itself always); third-party rules are below
MAY = {
    "rooflines": set(),
    "runtime": set(),
    "topology": {"rooflines", "runtime"},
    "kernels": {"rooflines", "runtime"},
    "profilers": {"kernels", "rooflines", "topology", "runtime"},
    "reports": {"profilers", "kernels", "rooflines", "topology", "runs"},
    "runs": {"rooflines", "topology"},  # a job's traces: read as data, bounded on the model; never run, never plotted
    "pkroof": {"reports", "profilers", "kernels", "rooflines", "topology", "runtime", "runs"},
}
# modules of a room another room may import, where it may import only some (reports read records, never run ranks)
ONLY = {
    ("reports", "profilers"): {"pkroof.profilers.records", "pkroof.profilers.evaluate", "pkroof.profilers.analysis"},
    ("reports", "kernels"): {"pkroof.kernels.catalogue"},
}
MUST_NOT = {  # third-party packages a room must not import
    "rooflines": {"torch", "triton", "pynvml", "plotly", "pandas", "jinja2"},
    "topology": {"plotly", "pandas", "jinja2"},
    "kernels": {"plotly", "pandas", "jinja2", "pynvml"},
    "profilers": {"plotly", "pandas", "jinja2"},
    "runtime": {"plotly", "pandas", "jinja2"},
    "runs": {"torch", "triton", "pynvml", "plotly", "jinja2"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in ROOMS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            out[name] = path
    return out


MODULES = _modules()


def _room(module: str) -> str:
    for folder, package in sorted(ROOMS.items(), key=lambda kv: -len(kv[1])):
        if module == package or module.startswith(package + "."):
            return folder
    raise AssertionError(module)


def _imports(module: str, path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file, relative ones resolved; `from x import y` where x.y is
    a module of pkroof counts as importing x.y."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for a in node.names:
                full = f"{base}.{a.name}"
                out.append((full if full in MODULES else base, node.lineno))
    return out


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for target, _ in _imports(module, path):
            while target and target not in MODULES:  # pkroof.x.y.z → the module that defines it
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + ".") and target != "pkroof":
                graph[module].add(target)
    return graph


def violations(modules: dict[str, Path]) -> list[str]:
    """One line per import a room may not make (MAY, ONLY, MUST_NOT)."""
    wrong = []
    for module, path in modules.items():
        room = _room(module)
        for target, line in _imports(module, path):
            where = f"{path.name}:{line}: {room} imports {target}"
            if target.split(".")[0] in MUST_NOT.get(room, ()):
                wrong.append(where)
            if not target.startswith("pkroof."):
                continue
            other = _room(target)
            if other == room:
                continue
            only = ONLY.get((room, other))
            allowed = other in MAY[room] and (only is None or any(target.startswith(m) for m in only))
            if not allowed:
                wrong.append(where)
    return wrong


def test_every_room_imports_only_the_rooms_it_may():
    wrong = violations(MODULES)
    assert not wrong, "\n".join(wrong)


def test_the_rules_catch_what_they_forbid(tmp_path):
    # a rooflines module that imports torch and the profiler, a report that starts ranks, and a trace reader that
    # imports torch, a problem and plotly: six violations
    (tmp_path / "bound.py").write_text("import torch\nfrom pkroof.profilers import run\n")
    (tmp_path / "job.py").write_text("from pkroof.profilers.run import run_job\nfrom pkroof.profilers import records\n")
    (tmp_path / "read.py").write_text("import torch\nfrom pkroof.kernels import catalogue\nimport plotly\n")
    fake = {
        "pkroof.rooflines.bound": tmp_path / "bound.py",
        "pkroof.reports.job": tmp_path / "job.py",
        "pkroof.runs.read": tmp_path / "read.py",
    }
    assert violations(fake) == [
        "bound.py:1: rooflines imports torch",
        "bound.py:2: rooflines imports pkroof.profilers.run",
        "job.py:1: reports imports pkroof.profilers.run",
        "read.py:1: runs imports torch",
        "read.py:2: runs imports pkroof.kernels.catalogue",
        "read.py:3: runs imports plotly",
    ]


def test_no_import_cycle_between_files():
    graph = _edges()
    cycles, seen, stack, on_stack = [], set(), [], set()

    def visit(node: str) -> None:
        seen.add(node)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt in on_stack:
                cycles.append(" → ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in seen:
                visit(nxt)
        stack.pop()
        on_stack.discard(node)

    for node in sorted(graph):
        if node not in seen:
            visit(node)
    assert not cycles, "\n".join(cycles)


def test_the_checks_see_the_imports_they_judge():
    # the graph holds what the rules are about: the CLI reaches every room; the report reads records
    graph = _edges()
    assert "pkroof.profilers.records" in graph["pkroof.reports.job"]
    assert "pkroof.rooflines.bound" in graph["pkroof.rooflines.analysis"]
    assert any(t.startswith("pkroof.runtime") for t in graph["pkroof.topology.probe"])
