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
needs no torch (its files import torch inside `inputs` and `reference`); loading a user's file runs it, as
naming a Python file to pkroof means to. Nothing here ever loads a file named in a results file.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pkroof.kernels import problems
from pkroof.rooflines.units import fmt_bytes, parse_size

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


def from_module(module: ModuleType, name: str, path: Path, *, suite: bool) -> Problem:
    """A Problem from a module that follows the contract; a ValueError of one line naming what it lacks."""
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
        sha256=hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "",
    )


def check_path(path: Path) -> None:
    """A ValueError unless `path` is an existing .py file (said before anything imports it)."""
    if not path.exists():
        raise ValueError(f"{path}: no such problem file")
    if not path.is_file() or path.suffix != ".py":
        raise ValueError(f"{path}: not a problem file (a problem is a Python file ending in .py)")


def _import_file(path: Path) -> ModuleType:
    """Run the file as Python runs a script: its own folder first on the import path, so it may import its
    neighbours."""
    check_path(path)
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"pkroof_user_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        raise ValueError(f"{path}: cannot import it ({type(e).__name__}{': ' + first if first else ''})") from None
    except SystemExit as e:  # a file that exits while imported must not end pkroof silently
        raise ValueError(f"{path}: exited while it was imported (SystemExit: {e.code})") from None
    return module


_CONSTANTS = ("CATEGORY", "SOURCE", "SHAPES")
_FUNCTIONS = ("inputs", "reference", "workload")


def _literal(node: ast.expr) -> Any:
    """A constant expression's value (literals, and integer arithmetic such as 8192 * 8192 * 2); ValueError else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.Pow, ast.FloorDiv)):
        left, right = _literal(node.left), _literal(node.right)
        if not (isinstance(left, int) and isinstance(right, int)) or (isinstance(node.op, ast.Pow) and right > 64):
            raise ValueError("not integer arithmetic")
        ops = {ast.Mult: int.__mul__, ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Pow: int.__pow__}
        return ops.get(type(node.op), int.__floordiv__)(left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return {k.arg: _literal(k.value) for k in node.keywords if k.arg is not None}
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    return ast.literal_eval(node)


def _signature(fn: ast.FunctionDef) -> inspect.Signature:
    """The signature of a function as written, its defaults literals (ValueError where one is not)."""
    a, P = fn.args, inspect.Parameter
    positional = [*a.posonlyargs, *a.args]
    defaults = [P.empty] * (len(positional) - len(a.defaults)) + [_literal(d) for d in a.defaults]
    params = [
        P(x.arg, P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD, default=d)
        for i, (x, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    params += [
        P(x.arg, P.KEYWORD_ONLY, default=P.empty if d is None else _literal(d))
        for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
    ]
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


class WouldRunError(Exception):
    """A problem file read from its source would have to run here (inside `without_running`)."""


_NOT_HERE = contextvars.ContextVar("pkroof_not_here", default=False)


@contextlib.contextmanager
def without_running() -> Iterator[None]:
    """While inside: a problem file read from its source never runs in this process (WouldRunError instead)."""
    token = _NOT_HERE.set(True)
    try:
        yield
    finally:
        _NOT_HERE.reset(token)


def refuse_to_run(path: Path | str) -> None:
    """WouldRunError inside `without_running`: the caller is about to run a problem file's code."""
    if _NOT_HERE.get():
        raise WouldRunError(f"{path}: its code would run here")


def read_without_running(path: Path) -> Problem | None:
    """A user's problem file as the catalogue knows it from its source alone (literal constants, signatures),
    never imported; None where its source sets them by code."""
    check_path(path)
    module = _read_source(path)
    return None if module is None else from_module(module, path.stem.replace("_", "-"), path, suite=False)


class _FromSource:
    """A user's problem file read from its source without running it: its docstring, its literal CATEGORY, SOURCE
    and SHAPES, and the signatures of its functions. The file is imported (runs) the first time one of its
    functions is called or anything else of it is asked for."""

    def __init__(self, path: Path, doc: str | None, constants: dict, functions: dict[str, inspect.Signature]):
        self._path, self.__doc__, self._constants, self._functions = path, doc, constants, functions
        self._module: ModuleType | None = None

    def _real(self) -> ModuleType:
        if self._module is None:
            refuse_to_run(self._path)
            self._module = _import_file(self._path)
        return self._module

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._constants:
            return self._constants[name]
        if name in self._functions:

            def call(*args: Any, **kwargs: Any) -> Any:
                return getattr(self._real(), name)(*args, **kwargs)

            call.__signature__ = self._functions[name]  # type: ignore[attr-defined]
            call.__name__ = name
            return call
        if name in _CONSTANTS or name in _FUNCTIONS:  # the source defines none: nothing to import for it
            raise AttributeError(name)
        return getattr(self._real(), name)


_NAMES = (*_CONSTANTS, *_FUNCTIONS)


def _defines(node: ast.stmt) -> list[str]:
    """The contract's names a top-level statement binds or touches other than by a plain literal assignment or a
    def: where any is, the file is imported rather than read (a star import, an import of `inputs`, an update of
    SHAPES)."""
    if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
        return ["*"]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [n for a in node.names if (n := (a.asname or a.name).split(".")[0]) in _NAMES]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name] if node.name in _NAMES and (node.decorator_list or isinstance(node, ast.ClassDef)) else []
    plain = isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets)
    named = [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in _NAMES]
    if plain:
        targets = {t.id for t in node.targets}
        return [n for n in named if n not in targets or n in _FUNCTIONS]
    return named


def _read_source(path: Path) -> _FromSource | None:
    """The problem file's spec from its source, or None where it cannot be read without running it (a name the
    contract looks for set by code rather than written: see _defines; a default or SHAPES that is not a literal)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return None  # importing it says what is wrong, in the usual words
    constants: dict[str, Any] = {}
    functions: dict[str, inspect.Signature] = {}
    try:
        for node in tree.body:
            if _defines(node):
                return None
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                names = [t.id for t in node.targets if t.id in _CONSTANTS]
                if any(n in constants for n in names):
                    return None  # set twice: which one holds is the code's business
                constants |= dict.fromkeys(names, _literal(node.value)) if names else {}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _FUNCTIONS:
                if node.name in functions:
                    return None
                functions[node.name] = _signature(node)
    except (ValueError, TypeError, SyntaxError, KeyError, RecursionError):  # not a literal: run the file instead
        return None
    return _FromSource(path, ast.get_docstring(tree, clean=False), constants, functions)


def _load_file(path: Path) -> Problem:
    check_path(path)
    module = _read_source(path) or _import_file(path)
    return from_module(module, path.stem.replace("_", "-"), path, suite=False)


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
        return _load_file(Path(name_or_path))
    if not is_suite_problem(name_or_path):
        raise ValueError(f"unknown problem {name_or_path!r} (`pkroof problems` lists the suite; or give a .py file)")
    module = importlib.import_module(f"pkroof.kernels.problems.{name_or_path.replace('-', '_')}")
    return from_module(module, name_or_path, SUITE_DIR / f"{name_or_path.replace('-', '_')}.py", suite=True)


def suite() -> list[Problem]:
    return [load(n) for n in names()]
