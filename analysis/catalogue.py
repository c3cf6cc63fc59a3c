"""The problem catalogue: the suite's files (kernels/problems/) and a user's own, under one contract.

A problem is one Python file. Required: `inputs(rank, world_size, *, seed, device, **params)` (this rank's inputs,
a tensor or a tuple of them, drawn on `device`) and `reference(*inputs)` (PyTorch + torch.distributed on the
default group; every rank returns its own output). Everything else is optional and torch-free:

    docstring   its first line says what the problem is            default: the file's name
    CATEGORY    a word to group problems by                        default: "user" (the suite uses CATEGORIES)
    SOURCE      the real code it comes from                        default: the file's path
    SHAPES      {"name": {param: value}}, the default "small"      default: one shape, "default", of inputs()'
                where there is one, else the first                 keyword defaults
    workload    workload(world_size, **params[, dtype]) -> pkroof.rooflines.Workload, a hand-written workload
                (else the reference is traced)

Parameters without a default and not in SHAPES are given with `--param name=value`. Loading a suite problem
needs no torch (its files import torch inside `inputs` and `reference`); a user's file is read once and runs when
its code is needed (analysis/source.py), as naming a Python file to pkroof means it may. Nothing here ever loads a
file named in a results file.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pkroof.kernels import problems
from pkroof.rooflines.units import fmt_bytes, parse_size

from .source import FromSource, SourceFile, read, run, spec

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
USER_CATEGORY = "user"
SUITE_DIR = Path(problems.__file__).resolve().parent  # kernels/problems/
DEFAULT_SHAPE = "small"  # the default shape where a problem has one
UNNAMED_SHAPE = "default"  # the one shape of a file without SHAPES: inputs()' keyword defaults
_NOT_PARAMS = ("seed", "device")


def is_byte_size(name: str) -> bool:
    """Whether a parameter is a number of bytes (`size`, `size_bytes`, any `*_bytes`), which takes parse_size's
    units; every other parameter counts things (m, n, k, tokens, hidden, experts) and takes plain digits."""
    return name == "size" or name.endswith("_bytes")


def parse_params(pairs: list[str]) -> dict[str, int]:
    """['m=8192', 'size_bytes=64MiB'] → {'m': 8192, 'size_bytes': 67108864}: every value a positive integer, byte
    sizes (is_byte_size) with parse_size's units, counts and dimensions in plain digits (no units: `k=4K` would
    read as bytes). A name given twice is an error, not the last one silently."""
    out: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not name:
            raise ValueError(f"--param takes name=value, got {pair!r}")
        if name in out:
            raise ValueError(f"--param {name} is given twice")
        if is_byte_size(name):
            try:
                out[name] = parse_size(value)
            except ValueError as e:
                raise ValueError(f"--param {name}: {e}") from None
        elif value.isascii() and value.isdigit() and int(value) > 0:
            out[name] = int(value)
        else:
            raise ValueError(
                f"--param {name}={value}: must be a positive integer in plain digits ({name} is a count, not a byte "
                "size, so it takes no units such as KiB)"
            )
    return out


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"parameter {name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class Problem:
    name: str  # hyphenated: "gemm-reduce-scatter"; a user file's: its stem
    path: Path
    module: ModuleType = field(repr=False)
    category: str
    source: str
    summary: str  # the docstring's first line ("" without one)
    shapes: dict[str, dict[str, Any]]
    default_shape: str
    required: tuple[str, ...]  # parameters inputs() takes without a default that SHAPES does not give
    suite: bool  # one of kernels/problems/: named by its name in records, rebuilt from the catalogue
    sha256: str  # of the file's bytes: what a record of a user's file names it by
    origin: SourceFile | None = field(
        default=None, repr=False, compare=False
    )  # a user's file: the bytes read, run from them

    @property
    def has_workload(self) -> bool:
        return callable(getattr(self.module, "workload", None))

    @property
    def workload_takes_dtype(self) -> bool:
        return self.has_workload and "dtype" in inspect.signature(self.module.workload).parameters

    @property
    def takes(self) -> tuple[str, ...]:
        """Every shape parameter: the named shapes' and inputs()' own."""
        names = dict.fromkeys(k for shape in self.shapes.values() for k in shape)
        return tuple(names | dict.fromkeys(_input_params(self.module.inputs)))

    def params(self, shape: str | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """The shape's parameters (default: the problem's default shape) with `overrides` on top; an unknown shape
        or parameter, a value that is not a positive integer, or a required parameter left out is a ValueError."""
        name = shape or self.default_shape
        if name not in self.shapes:
            raise ValueError(f"{self.name} has no shape {name!r} (shapes: {', '.join(self.shapes) or 'none'})")
        overrides = overrides or {}
        takes = self.takes
        unknown = [k for k in overrides if k not in takes]
        if unknown:
            raise ValueError(f"{self.name} has no parameter {', '.join(unknown)} (it takes: {', '.join(takes)})")
        for key, value in overrides.items():
            _positive(key, value)
        params = dict(self.shapes[name]) | overrides
        missing = [k for k in self.required if k not in params]
        if missing:
            pass_them = " ".join(f"--param {k}=N" for k in missing)
            raise ValueError(
                f"{self.path}: inputs() takes {', '.join(missing)} without a default and the file names no shape "
                f"that sets {'it' if len(missing) == 1 else 'them'}: pass {pass_them}"
            )
        return params

    def shape_label(self, shape: str | None = None, overrides: dict[str, Any] | None = None) -> str:
        """What results call this shape: its name, with the parameters set on top of it ("small size=64 MiB"),
        so runs of one problem at different sizes never share a label."""
        name = shape or self.default_shape
        base = self.shapes.get(name, {})
        changed = {k: v for k, v in (overrides or {}).items() if base.get(k) != v}
        if not changed:
            return name
        parts = [f"size={fmt_bytes(v)}" if k == "size_bytes" else f"{k}={v}" for k, v in changed.items()]
        return " ".join([name, *parts])

    def shape_of(self, params: dict[str, Any]) -> str:
        """The name of the shape whose parameters these are, else "k=v, ..."."""
        named = next((name for name, shape in self.shapes.items() if shape == params), None)
        return named or ", ".join(f"{k}={v}" for k, v in params.items())

    def check_size(self, overrides: dict[str, Any]) -> None:
        """ValueError, in one line, where --size (the override `size_bytes`) is given to a problem that has none."""
        if "size_bytes" in overrides and "size_bytes" not in self.takes:
            raise ValueError(
                f"{self.name} has no size (--size applies to collectives): set its shape with --shape "
                f"({', '.join(self.shapes)}) or --param name=value ({', '.join(self.takes)})"
            )

    def inputs(self, rank: int, world_size: int, *, seed: int, device: Any, params: dict[str, Any]) -> tuple:
        made = self.module.inputs(rank, world_size, seed=seed, device=device, **params)
        return made if isinstance(made, tuple) else (made,)

    def reference(self, *inputs: Any) -> Any:
        return self.module.reference(*inputs)

    def workload(self, world_size: int, params: dict[str, Any], dtype: str | None = None) -> Any:
        """The hand-written workload (its own dtype where `dtype` is None)."""
        extra = {} if dtype is None else {"dtype": dtype}
        return self.module.workload(world_size, **params, **extra)


class ProblemError(ValueError):
    """A problem file's own code failed (raised, or returned the wrong thing): one line naming file and function."""


def failure_line(problem: Problem, function: str, e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    line = f"{problem.path}: {function}() raised {type(e).__name__}" + (f": {first}" if first else "")
    if "CUDA" in first or "cuda" in first:  # pkroof traces on meta tensors and CPU ranks: tensors belong on `device`
        line += " (pkroof traces on the meta device and on CPU ranks: make the tensors on the `device` it passes)"
    return line


def guarded(problem: Problem, function: str, call: Callable[[], Any]) -> Any:
    """call(); what it raises becomes a ProblemError naming the file and the function. A ValueError from inputs()
    or workload() is the contract's shape error (a shape that does not divide) and stays as it is."""
    try:
        return call()
    except ValueError as e:
        if function in ("inputs", "workload") or isinstance(e, ProblemError):
            raise
        raise ProblemError(failure_line(problem, function, e)) from e
    except Exception as e:
        raise ProblemError(failure_line(problem, function, e)) from e
    except SystemExit as e:
        raise ProblemError(f"{problem.path}: {function}() exited (SystemExit: {e.code})") from None


def check_workload(workload: Any, where: str) -> None:
    """A ValueError of one line where a workload holds numbers no machine could do (negative, infinite, NaN) or
    nothing at all to bound: no communication, no FLOPs and no HBM bytes."""
    import math

    def number(what: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{where}: {what} must be a finite number ≥ 0, got {value!r}")
        return float(value)

    total = number("workload hbm_bytes", workload.hbm_bytes)
    for op in workload.compute:
        total += number(f"compute op {op.name!r}: flops", op.flops) + number(
            f"compute op {op.name!r}: hbm_bytes", op.hbm_bytes
        )
    for op in workload.comm:
        total += number(f"comm op {op.name!r}: size_bytes", op.size_bytes)
        if isinstance(op.group_size, bool) or not isinstance(op.group_size, int) or op.group_size < 1:
            raise ValueError(
                f"{where}: comm op {op.name!r}: group_size must be a whole number ≥ 1, got {op.group_size!r}"
            )
    if total == 0:
        raise ValueError(f"{where}: the workload has nothing to bound (no communication, no FLOPs, no HBM bytes)")


def _input_params(inputs: Callable) -> dict[str, inspect.Parameter]:
    """inputs()' shape parameters: every named parameter but the leading rank and world_size, seed and device."""
    try:
        signature = inspect.signature(inputs)
    except (TypeError, ValueError):
        return {}
    named = [p for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    positional = [p for p in named if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:2]
    return {p.name: p for p in named if p not in positional and p.name not in _NOT_PARAMS}


def _text(module: ModuleType, attr: str, where: str, default: str) -> str:
    value = getattr(module, attr, default)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: {attr} must be a non-empty string, got {value!r}")
    return value


def _shapes(module: ModuleType, where: str) -> tuple[dict[str, dict[str, Any]], str, tuple[str, ...]]:
    """(named shapes, the default one, parameters without a value anywhere)."""
    own = _input_params(module.inputs)
    if hasattr(module, "SHAPES"):
        shapes = module.SHAPES
        if not isinstance(shapes, dict) or not shapes:
            raise ValueError(f"{where}: SHAPES must be a non-empty dict of name → {{parameter: value}}")
        for name, params in shapes.items():
            if not isinstance(name, str) or not name or not isinstance(params, dict):
                raise ValueError(f"{where}: SHAPES[{name!r}] must be a dict of parameter values under a name")
            for key, value in params.items():
                if not isinstance(key, str):
                    raise ValueError(f"{where}: SHAPES[{name!r}] has a parameter name that is not a string: {key!r}")
                try:
                    _positive(key, value)
                except ValueError as e:
                    raise ValueError(f"{where}: SHAPES[{name!r}]: {e}") from None
        shapes = {name: dict(params) for name, params in shapes.items()}
        given = {k for params in shapes.values() for k in params}
        required = tuple(n for n, p in own.items() if p.default is p.empty and n not in given)
        return shapes, DEFAULT_SHAPE if DEFAULT_SHAPE in shapes else next(iter(shapes)), required
    defaults = {n: p.default for n, p in own.items() if p.default is not p.empty}
    for key, value in defaults.items():
        try:
            _positive(key, value)
        except ValueError as e:
            raise ValueError(f"{where}: inputs()' default for {key}: {e}") from None
    required = tuple(n for n, p in own.items() if p.default is p.empty)
    return {UNNAMED_SHAPE: defaults}, UNNAMED_SHAPE, required


def from_module(
    module: ModuleType | FromSource, name: str, path: Path, *, suite: bool, origin: SourceFile | None = None
) -> Problem:
    """A Problem from a module that follows the contract (a user's: `origin`, its source as read); a ValueError of
    one line naming what it lacks."""
    where = str(path)
    for attr in ("inputs", "reference"):
        if not callable(getattr(module, attr, None)):
            raise ValueError(
                f"problem file {where} has no function `{attr}`: a problem file needs inputs(rank, world_size, *, "
                "seed, device, **params) and reference(*inputs) (docs/problems.md)"
            )
    doc = module.__doc__ if isinstance(module.__doc__, str) else ""
    summary = (doc.strip().splitlines() or [""])[0]
    shapes, default, required = _shapes(module, where)
    return Problem(
        name=name,
        path=path,
        module=module,
        category=_text(module, "CATEGORY", where, USER_CATEGORY),
        source=_text(module, "SOURCE", where, where),
        summary=summary,
        shapes=shapes,
        default_shape=default,
        required=required,
        suite=suite,
        sha256=origin.sha256 if origin is not None else hashlib.sha256(path.read_bytes()).hexdigest(),
        origin=origin,
    )


def load_source(source: SourceFile) -> Problem:
    """A user's problem file from the bytes read: from its source alone where that says enough (source.spec: the
    file runs when one of its functions is first called), else run now."""
    module = spec(source) or run(source)
    return from_module(module, source.path.stem.replace("_", "-"), source.path, suite=False, origin=source)


def from_source(source: SourceFile, tree: ast.Module | None = None) -> Problem | None:
    """A user's problem file from its source alone (`tree`: its syntax tree, parsed already), never run in this
    process (an attempt is a bug: it asserts); None where its source does not say what the catalogue needs without
    running it."""
    module = spec(source, tree, runnable=False)
    if module is None:
        return None
    return from_module(module, source.path.stem.replace("_", "-"), source.path, suite=False, origin=source)


def names() -> list[str]:
    """The suite's problem names, sorted."""
    return sorted(p.stem.replace("_", "-") for p in SUITE_DIR.glob("*.py") if not p.name.startswith("_"))


def is_suite_problem(name: str) -> bool:
    return name in names()


def is_file(name_or_path: str) -> bool:
    """Whether `name_or_path` names a file rather than a suite problem."""
    return name_or_path.endswith(".py") or "/" in name_or_path or Path(name_or_path).exists()


def load(name_or_path: str) -> Problem:
    """A suite problem by name ("gemm-reduce-scatter") or a problem file by path ("my_problem.py")."""
    if is_file(name_or_path) and not is_suite_problem(name_or_path):
        return load_source(read(Path(name_or_path)))
    if not is_suite_problem(name_or_path):
        raise ValueError(f"unknown problem {name_or_path!r} (`pkroof problems` lists the suite; or give a .py file)")
    module = importlib.import_module(f"pkroof.kernels.problems.{name_or_path.replace('-', '_')}")
    return from_module(module, name_or_path, SUITE_DIR / f"{name_or_path.replace('-', '_')}.py", suite=True)


def suite() -> list[Problem]:
    return [load(n) for n in names()]
