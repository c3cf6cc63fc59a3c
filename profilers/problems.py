"""Problems: the built-in suite (kernels/problems/*.py) or a user's file, loaded and checked against the contract.

The contract is in kernels/problems/README.md: a one-line docstring, CATEGORY, SOURCE, SHAPES ("small" first),
inputs(rank, world_size, *, seed, device, **params), reference(*inputs), optionally workload(world_size, **params).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

CATEGORIES = (
    "collective",
    "tp-gemm",
    "tp-norm",
    "sequence-parallel",
    "expert-parallel",
    "data-parallel",
    "vocab-parallel",
    "decode",
    "long-tail",
)
SUITE_DIR = Path(__file__).resolve().parent.parent / "kernels" / "problems"
DEFAULT_SHAPE = "small"


@dataclass(frozen=True)
class Problem:
    name: str  # hyphenated: "gemm-reduce-scatter"
    path: Path
    module: ModuleType
    category: str
    source: str
    summary: str  # the docstring's first line
    shapes: dict[str, dict[str, Any]]

    @property
    def has_workload(self) -> bool:
        return callable(getattr(self.module, "workload", None))

    def params(self, shape: str | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """The shape's parameters (default "small") with `overrides` on top; unknown names are a ValueError."""
        name = shape or DEFAULT_SHAPE
        if name not in self.shapes:
            raise ValueError(f"{self.name} has no shape {name!r} (shapes: {', '.join(self.shapes)})")
        params = dict(self.shapes[name])
        unknown = set(overrides or {}) - set(params)
        if unknown:
            raise ValueError(
                f"{self.name} has no parameter {', '.join(sorted(unknown))} (it takes: {', '.join(params)})"
            )
        return params | (overrides or {})

    def shape_label(self, shape: str | None = None, overrides: dict[str, Any] | None = None) -> str:
        """What results call this shape: its name, with the parameters set on top of it ("small size=64 MiB"),
        so runs of one problem at different sizes never share a label."""
        name = shape or DEFAULT_SHAPE
        base = self.shapes.get(name, {})
        changed = {k: v for k, v in (overrides or {}).items() if base.get(k) != v}
        if not changed:
            return name
        from pkroof.rooflines.units import fmt_bytes

        parts = [f"size={fmt_bytes(v)}" if k == "size_bytes" else f"{k}={v}" for k, v in changed.items()]
        return " ".join([name, *parts])

    def inputs(self, rank: int, world_size: int, *, seed: int, device: Any, params: dict[str, Any]) -> tuple:
        made = self.module.inputs(rank, world_size, seed=seed, device=device, **params)
        return made if isinstance(made, tuple) else (made,)

    def reference(self, *inputs: Any) -> Any:
        return self.module.reference(*inputs)


def _check(module: ModuleType, where: str) -> None:
    for attr in ("CATEGORY", "SOURCE", "SHAPES", "inputs", "reference"):
        if not hasattr(module, attr):
            raise ValueError(f"problem file {where} lacks `{attr}` (see kernels/problems/README.md)")
    if module.CATEGORY not in CATEGORIES:
        raise ValueError(f"{where}: CATEGORY {module.CATEGORY!r} is not one of {', '.join(CATEGORIES)}")
    if not isinstance(module.SHAPES, dict) or DEFAULT_SHAPE not in module.SHAPES:
        raise ValueError(f"{where}: SHAPES must be a dict with a {DEFAULT_SHAPE!r} entry")
    if not (module.__doc__ or "").strip():
        raise ValueError(f"{where}: needs a one-line docstring saying what it is and where it comes from")


def _from_module(module: ModuleType, name: str, path: Path) -> Problem:
    _check(module, str(path))
    summary = module.__doc__.strip().splitlines()[0]
    return Problem(name, path, module, module.CATEGORY, module.SOURCE, summary, dict(module.SHAPES))


def _load_file(path: Path) -> Problem:
    if not path.is_file():
        raise ValueError(f"{path}: no such problem file")
    spec = importlib.util.spec_from_file_location(f"pkroof_user_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise ValueError(f"{path}: cannot import it ({type(e).__name__}: {e})") from None
    return _from_module(module, path.stem.replace("_", "-"), path)


def names() -> list[str]:
    return sorted(p.stem.replace("_", "-") for p in SUITE_DIR.glob("*.py") if not p.name.startswith("_"))


def is_suite_problem(name: str) -> bool:
    return name in names()


def load(name_or_path: str) -> Problem:
    """A suite problem by name ("gemm-reduce-scatter") or a problem file by path ("my_problem.py")."""
    if name_or_path.endswith(".py") or "/" in name_or_path:
        return _load_file(Path(name_or_path))
    if not is_suite_problem(name_or_path):
        raise ValueError(f"unknown problem {name_or_path!r} (`pkroof problems` lists the suite; or give a .py file)")
    try:
        module = importlib.import_module(f"pkroof.kernels.problems.{name_or_path.replace('-', '_')}")
    except ImportError as e:
        raise ValueError(
            f"{name_or_path}: cannot import it ({e}); problems are PyTorch code: pip install torch"
        ) from None
    return _from_module(module, name_or_path, SUITE_DIR / f"{name_or_path.replace('-', '_')}.py")


def suite() -> list[Problem]:
    return [load(n) for n in names()]
