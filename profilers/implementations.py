"""The implementations `pkroof profile` runs beside a problem's reference: the reference itself, a built-in that
applies to the problem (kernels/registry.py), or a user's `path/to/file.py:function`."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pkroof.analysis.catalogue import Problem


def check_builtin(problem: str, spec: str) -> Callable[..., Any] | None:
    """The reference (None here) or a built-in implementation that applies to `problem`; a ValueError otherwise."""
    from pkroof.kernels.registry import BUILTIN_IMPLS

    if spec == "reference":
        return None
    builtin = BUILTIN_IMPLS[spec]
    if problem not in builtin.problems:
        raise ValueError(f"{spec} implements {', '.join(sorted(builtin.problems))}, not {problem}")
    return builtin.fn


def resolve_impl(problem: Problem, spec: str) -> Callable[..., Any]:
    """'reference', a built-in implementation that applies (kernels/registry.py), or 'path/to/file.py:function' with
    the reference's signature; anything else is a ValueError."""
    from pkroof.kernels.registry import BUILTIN_IMPLS

    if spec == "reference":
        return problem.reference
    if spec in BUILTIN_IMPLS:
        return check_builtin(problem.name, spec)
    path, name = check_impl_spec(spec)
    module_spec = importlib.util.spec_from_file_location(f"pkroof_impl_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        raise ValueError(_import_error(path, e)) from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{path} has no function {name!r}")
    return fn


def check_impl_spec(spec: str) -> tuple[str, str]:
    """(file, function) of a user's 'path/to/file.py:function', the file existing; else a ValueError of one line."""
    from pkroof.kernels.registry import BUILTIN_IMPLS

    path, sep, name = spec.rpartition(":")
    if not sep and spec.endswith(".py"):  # a file without its function: ask for it, naming the ones it defines
        raise ValueError(f"--impl {spec}: which function? give {spec}:FUNCTION{_functions_in(Path(spec))}")
    if not sep or not path.endswith(".py") or not name.isidentifier():
        raise ValueError(
            f"unknown implementation {spec!r}: give 'reference', one of {', '.join(BUILTIN_IMPLS)}, "
            "or path/to/file.py:function"
        )
    if not Path(path).is_file():
        what = "is not a file" if Path(path).exists() else "does not exist"
        raise ValueError(f"implementation file {path} {what}")
    return path, name


def _functions_in(path: Path) -> str:
    """ " (it defines: a, b)" for the top-level functions of a file, read without running it; "" where it cannot be
    read."""
    import ast

    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return ""
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return f" (it defines: {', '.join(names)})" if names else ""


def _import_error(path: str, e: Exception) -> str:
    """One line for an implementation file that does not import: 'file.py:function: ...' where a function's
    decorator raised (a bad @declare), else 'file.py: cannot import it (SyntaxError: ...)'."""
    import ast
    import traceback

    here = Path(path).resolve()
    lines = [n for f, n in traceback.walk_tb(e.__traceback__) if Path(f.f_code.co_filename).resolve() == here]
    if lines and not isinstance(e, SyntaxError):
        for node in ast.walk(ast.parse(here.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                d.lineno <= lines[-1] <= (d.end_lineno or d.lineno) for d in node.decorator_list
            ):
                return f"{path}:{node.name}: {e}"
    return f"{path}: cannot import it ({type(e).__name__}: {e})"
