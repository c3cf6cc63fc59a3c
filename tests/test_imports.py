"""The house's one-way flow, read from the code: which room may import which, and no import cycle between files.

Rooms are the package's folders (ARCHITECTURE.md). Every import counts, a function's own included: a cycle broken
by importing inside a function is still a cycle.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = {  # folder → the package under which it installs (pyproject.toml)
    "rooflines": "pkroof.rooflines",
    "runtime": "pkroof.runtime",
    "topology": "pkroof.topology",
    "kernels": "pkroof.kernels",
    "analysis": "pkroof.analysis",
    "profilers": "pkroof.profilers",
    "records": "pkroof.records",
    "runs": "pkroof.runs",
    "reports": "pkroof.reports",
    "pkroof": "pkroof",
}
# ARCHITECTURE.md's table, row by row: which of pkroof's rooms each room may import (itself always)
MAY = {
    "rooflines": set(),  # stdlib (numpy/scipy if needed)
    "topology": {"rooflines", "runtime"},  # rooflines' types only (TYPES below)
    "kernels": {"rooflines", "runtime"},  # rooflines' types and workload builders, runtime's PTX helpers
    "analysis": {"rooflines", "topology", "kernels", "runtime"},
    "profilers": {"analysis", "kernels", "rooflines", "topology", "runtime", "records"},
    "records": {"analysis", "rooflines", "topology"},
    "runs": {"rooflines", "topology", "analysis"},
    "reports": {"records", "analysis", "runs", "rooflines"},
    "runtime": set(),
    "pkroof": set(ROOMS) - {"pkroof"},  # the CLI and the API: thin, over every room
}
# the model's types (and the traffic a collective puts on a link): what topology/ and kernels/ may take from it
TYPES = {
    "pkroof.rooflines.algorithms",
    "pkroof.rooflines.collectives",
    "pkroof.rooflines.mechanisms",
    "pkroof.rooflines.nccl",
    "pkroof.rooflines.system",
    "pkroof.rooflines.units",
    "pkroof.rooflines.workload",
}
# modules of a room another room may import, where the table allows only some
ONLY = {
    ("topology", "rooflines"): TYPES,
    ("kernels", "rooflines"): TYPES | {"pkroof.rooflines.builders"},
    ("kernels", "runtime"): {"pkroof.runtime.ptx"},
}
MUST_NOT = {  # third-party packages a room must not import
    "rooflines": {"torch", "triton", "pynvml", "plotly", "pandas", "jinja2", "typer"},
    "topology": {"plotly", "pandas", "jinja2", "typer"},
    "kernels": {"plotly", "pandas", "jinja2", "pynvml", "typer"},
    "analysis": {"plotly", "jinja2", "pynvml", "typer"},
    "profilers": {"plotly", "jinja2", "typer"},
    "records": {"plotly", "jinja2", "pynvml", "triton", "typer"},
    "runs": {"torch", "triton", "pynvml", "plotly", "jinja2", "typer"},
    "reports": {"torch", "triton", "pynvml", "typer"},
    "runtime": {"plotly", "pandas", "jinja2", "typer"},
}
MUST_NOT_AT_TOP = {"records": {"torch"}}  # records: never torch at module level (reading records stays light)


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


def _type_checking(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING")


def _walk(body: list[ast.stmt], top: bool) -> list[tuple[ast.stmt, bool]]:
    """Every import statement with whether it runs at module level; an `if TYPE_CHECKING:` block never runs, so its
    imports (annotations only) are not imports."""
    out: list[tuple[ast.stmt, bool]] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append((node, top))
        elif isinstance(node, ast.If) and _type_checking(node):
            out += _walk(node.orelse, top)
        else:
            inner = top and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []) or []:
                    out += _walk([child], inner) if isinstance(child, ast.stmt) else _walk(child.body, inner)
    return out


def _reexports(package: str) -> dict[str, str]:
    """name → the module of the package that defines it, for what the package's __init__ imports from its own
    modules (`from pkroof.rooflines import bound` is an import of pkroof.rooflines.bound)."""
    path = MODULES.get(package)
    if path is None or path.name != "__init__.py":
        return {}
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out |= {a.asname or a.name: f"{package}.{node.module}" for a in node.names}
    return out


def _imports(module: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import in the file, relative ones resolved; `from x import
    y` where x.y is a module of pkroof, or a name x's __init__ takes from one of its modules, counts as that module."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node, top in _walk(ast.parse(path.read_text()).body, True):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names = _reexports(base) if base != package else {}
            for a in node.names:
                full = f"{base}.{a.name}"
                out.append((full if full in MODULES else names.get(a.name, base), node.lineno, top))
    return out


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for target, _, _ in _imports(module, path):
            while target and target not in MODULES:  # pkroof.x.y.z → the module that defines it
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + ".") and target != "pkroof":
                graph[module].add(target)
    return graph


def violations(modules: dict[str, Path]) -> list[str]:
    """One line per import a room may not make (MAY, ONLY, MUST_NOT, MUST_NOT_AT_TOP)."""
    wrong = []
    for module, path in modules.items():
        room = _room(module)
        for target, line, top in _imports(module, path):
            where = f"{path.name}:{line}: {room} imports {target}"
            third = target.split(".")[0]
            if third in MUST_NOT.get(room, ()) or (top and third in MUST_NOT_AT_TOP.get(room, ())):
                wrong.append(where)
            if not target.startswith("pkroof.") or target.startswith("pkroof.__"):
                continue
            other = _room(target)
            if other == room or (other == "pkroof" and target.count(".") == 0):
                continue
            only = ONLY.get((room, other))
            allowed = other in MAY[room] and (only is None or target in only)
            if not allowed:
                wrong.append(where)
    return wrong


def test_every_room_imports_only_the_rooms_it_may():
    wrong = violations(MODULES)
    assert not wrong, "\n".join(wrong)


# one planted file per row of the table: (room, what the file says, the lines the rules must give)
PLANTED = {
    "rooflines": ("import torch\nfrom pkroof.topology import model\n", ["torch", "pkroof.topology.model"]),
    "topology": ("from pkroof.rooflines import bound\nimport pandas\n", ["pkroof.rooflines.bound", "pandas"]),
    "kernels": (
        "from pkroof.analysis import catalogue\nfrom pkroof.runtime import launch\n",
        ["pkroof.analysis.catalogue", "pkroof.runtime.launch"],
    ),
    "analysis": ("from pkroof.profilers import run\nimport plotly\n", ["pkroof.profilers.run", "plotly"]),
    "profilers": ("from pkroof.reports import build\nimport jinja2\n", ["pkroof.reports.build", "jinja2"]),
    "records": (
        "import torch\nfrom pkroof.profilers import run\n\n\ndef f():\n    import torch\n",
        ["torch", "pkroof.profilers.run"],
    ),  # torch inside a function is allowed
    "runs": ("import torch\nfrom pkroof.kernels import registry\n", ["torch", "pkroof.kernels.registry"]),
    "reports": (
        "import torch\nfrom pkroof.kernels import registry\nfrom pkroof.profilers import run\n",
        ["torch", "pkroof.kernels.registry", "pkroof.profilers.run"],
    ),
    "runtime": ("from pkroof.topology import model\nimport pandas\n", ["pkroof.topology.model", "pandas"]),
    "pkroof": ("from pkroof.profilers import run\nfrom pkroof.reports import build\nimport torch\n", []),
}


@pytest.mark.parametrize("room", list(ROOMS))
def test_the_rules_catch_a_planted_violation_of_each_row(room, tmp_path):
    text, expected = PLANTED[room]
    (tmp_path / "planted.py").write_text(text)
    lines = [f"planted.py:{n}: {room} imports {t}" for n, t in enumerate(expected, 1)]
    assert violations({f"{ROOMS[room]}.planted": tmp_path / "planted.py"}) == lines


def test_annotations_only_imports_are_not_imports(tmp_path):
    (tmp_path / "page.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n")
    assert violations({"pkroof.reports.page": tmp_path / "page.py"}) == []


def _table_rows(text: str) -> dict[str, str]:
    """A markdown table's rows whose first cell is a room: `folder/` → the row."""
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)/` \|.*$", text, re.M)}


def test_the_enforced_table_is_the_documented_one():
    # docs/layout.md (in the tree) names each room and what it may import; ARCHITECTURE.md (beside the checkout,
    # where there is one) names the same rooms
    rows = {k: v for k, v in _table_rows((ROOT / "docs" / "layout.md").read_text()).items() if k in ROOMS}
    assert sorted(rows) == sorted(ROOMS)  # every room has its row (tests/, tools/, ... have rows of another table)
    for room, row in rows.items():
        may = row.rsplit("|", 2)[-2].split(";")[0]  # what follows a semicolon is what it must not import
        named = {r for r in ROOMS if re.search(rf"\b{r}\b", may) and r != "pkroof"}
        assert named == (MAY[room] if room != "pkroof" else named), (room, named)
    shared = ROOT.parent / "shared" / "ARCHITECTURE.md"
    if shared.is_file():
        assert sorted(_table_rows(shared.read_text())) == sorted(set(ROOMS) - {"pkroof"})


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
    assert "pkroof.records.format" in graph["pkroof.records.report_inputs"]
    assert "pkroof.reports.build" in graph["pkroof.report"]
    assert "pkroof.rooflines.bound" in graph["pkroof.rooflines.analyze"]
    assert any(t.startswith("pkroof.runtime") for t in graph["pkroof.topology.probe"])
