"""A user's problem file as its source: read once, understood without running it where it can be, and run from the
very bytes read (never read again).

Without running it, its source says: its docstring, its literal CATEGORY, SOURCE and SHAPES, the signatures of its
functions (spec()), and whether importing it runs anything of the user's own beyond definitions (declarative()).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .params import TorchDtype


def check_path(path: Path) -> None:
    """A ValueError unless `path` is an existing .py file (said before anything imports it)."""
    if not path.exists():
        raise ValueError(f"{path}: no such problem file")
    if not path.is_file() or path.suffix != ".py":
        raise ValueError(f"{path}: not a problem file (a problem is a Python file ending in .py)")


@dataclass(frozen=True)
class SourceFile:
    """A problem file's path and the bytes read from it, once: everything after reads these (a process the file is
    analysed in gets them too)."""

    path: Path
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def tree(self) -> ast.Module | None:
        """Its syntax tree; None where it does not parse (importing it then says what is wrong, in the usual words)."""
        try:
            return ast.parse(self.data, filename=str(self.path))
        except (SyntaxError, ValueError, RecursionError):
            return None


def read(path: Path) -> SourceFile:
    check_path(path)
    return SourceFile(path, path.read_bytes())


def run(source: SourceFile) -> ModuleType:
    """Run the file as Python runs a script, from the bytes read: its own folder first on the import path, so it may
    import its neighbours. What it raises while imported is a ValueError of one line."""
    path = source.path
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"pkroof_user_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    # importable by its name, as under torchrun: pickle finds the classes it defines (a namedtuple sent with
    # broadcast_object_list) by module and name, here and in every rank process that runs the file (issue 32 item 5b)
    sys.modules[spec.name] = module
    try:
        exec(compile(source.data, str(path), "exec"), module.__dict__)  # naming a file to pkroof means to run it
    except Exception as e:
        sys.modules.pop(spec.name, None)
        first = (str(e).strip().splitlines() or [""])[0]
        raise ValueError(f"{path}: cannot import it ({type(e).__name__}{': ' + first if first else ''})") from None
    except SystemExit as e:  # a file that exits while imported must not end pkroof silently
        sys.modules.pop(spec.name, None)
        raise ValueError(f"{path}: exited while it was imported (SystemExit: {e.code})") from None
    return module


# --- what the source says without running it ----------------------------------------------------------------------

CONSTANTS = ("CATEGORY", "SOURCE", "SHAPES")
FUNCTIONS = ("inputs", "reference", "workload")
_NAMES = (*CONSTANTS, *FUNCTIONS)


def _literal(node: ast.expr) -> Any:
    """A constant expression's value (literals, integer arithmetic such as 8192 * 8192 * 2, a torch dtype written
    torch.bfloat16); ValueError else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.Pow, ast.FloorDiv)):
        left, right = _literal(node.left), _literal(node.right)
        if not (isinstance(left, int) and isinstance(right, int)) or (isinstance(node.op, ast.Pow) and right > 64):
            raise ValueError("not integer arithmetic")
        ops = {ast.Mult: int.__mul__, ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Pow: int.__pow__}
        return ops.get(type(node.op), int.__floordiv__)(left, right)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return TorchDtype(f"torch.{node.attr}")  # a dtype written as torch.bfloat16
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_literal(e) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return {k.arg: _literal(k.value) for k in node.keywords if k.arg is not None}
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    return ast.literal_eval(node)


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> inspect.Signature:
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
        return [n for n in named if n not in targets or n in FUNCTIONS]
    return named


class FromSource:
    """A problem file as a module, read from its source: its docstring, its literal CATEGORY, SOURCE and SHAPES, and
    the signatures of its functions. `run` imports the real module the first time one of its functions is called or
    anything else of it is asked for; without it (None) nothing of the file may run here, and asking is a bug."""

    def __init__(
        self,
        doc: str | None,
        constants: dict,
        functions: dict[str, inspect.Signature],
        run: Callable[[], ModuleType] | None,
    ) -> None:
        self.__doc__, self._constants, self._functions, self._run = doc, constants, functions, run
        self._module: ModuleType | None = None

    def _real(self) -> ModuleType:
        if self._module is None:
            assert self._run is not None, "a problem read to be answered without running it was asked to run"
            self._module = self._run()
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
        if name in _NAMES:  # the source defines none: nothing to import for it
            raise AttributeError(name)
        return getattr(self._real(), name)


def spec(source: SourceFile, tree: ast.Module | None = None, *, runnable: bool = True) -> FromSource | None:
    """The problem file's spec from its source (imported by `run(source)` when a function is called; never where not
    `runnable`), or None where it cannot be read without running it (a name the contract looks for set by code
    rather than written: see _defines; a default or SHAPES that is not a literal)."""
    tree = tree or source.tree()
    if tree is None:
        return None
    constants: dict[str, Any] = {}
    functions: dict[str, inspect.Signature] = {}
    try:
        for node in tree.body:
            if _defines(node):
                return None
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                names = [t.id for t in node.targets if t.id in CONSTANTS]
                if any(n in constants for n in names):
                    return None  # set twice: which one holds is the code's business
                constants |= dict.fromkeys(names, _literal(node.value)) if names else {}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in FUNCTIONS:
                if node.name in functions:
                    return None
                functions[node.name] = _signature(node)
    except (ValueError, TypeError, SyntaxError, KeyError, RecursionError):  # not a literal: run the file instead
        return None
    doc = ast.get_docstring(tree, clean=False)
    return FromSource(doc, constants, functions, (lambda: run(source)) if runnable else None)


# --- whether importing it runs anything of the user's own but definitions -----------------------------------------


def _builds_a_dict(node: ast.AST) -> bool:
    """`dict(m=64, n=32)`: the builtin, keywords only (SHAPES as the suite writes them)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args


def _calls(*nodes: ast.AST | None) -> bool:
    """Whether evaluating these runs code: a call (but the builtin dict() of keywords), an await or a yield."""
    for node in nodes:
        for n in ast.walk(node) if node is not None else ():
            if isinstance(n, ast.Await | ast.Yield | ast.YieldFrom) or (
                isinstance(n, ast.Call) and not _builds_a_dict(n)
            ):
                return True
    return False


def _is_main(test: ast.expr) -> bool:
    """`__name__ == "__main__"`: false while the file is imported, so its block never runs."""
    return ast.unparse(test) in ("__name__ == '__main__'", "'__main__' == __name__")


def _sibling(folder: Path, node: ast.Import | ast.ImportFrom) -> bool:
    """Whether the import is relative or names a module of the file's own folder (its code would run)."""
    if isinstance(node, ast.ImportFrom) and (node.level or not node.module):
        return True
    names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
    tops = {name.split(".")[0] for name in names if name}
    return any((folder / f"{top}.py").exists() or (folder / top).is_dir() for top in tops)


def _defines_only(node: ast.stmt, folder: Path) -> bool:
    match node:
        case ast.Import() | ast.ImportFrom():
            return not _sibling(folder, node)
        case ast.FunctionDef() | ast.AsyncFunctionDef():
            a = node.args
            annotations = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x]
            return not node.decorator_list and not _calls(*a.defaults, *a.kw_defaults, *annotations, node.returns)
        case ast.ClassDef():
            plain = not node.decorator_list and not node.keywords and not _calls(*node.bases)
            return plain and all(_defines_only(n, folder) for n in node.body)
        case ast.Assign() | ast.AnnAssign():
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n for t in targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])]
            return all(isinstance(n, ast.Name) for n in names) and not _calls(
                node.value, getattr(node, "annotation", None)
            )
        case ast.Expr(value=ast.Constant()) | ast.Pass():
            return True
        case ast.If() if _is_main(node.test):
            return all(_defines_only(n, folder) for n in node.orelse)
        case ast.If():
            return not _calls(node.test) and all(_defines_only(n, folder) for n in (*node.body, *node.orelse))
        case ast.Try():
            handlers = all(not _calls(h.type) and all(_defines_only(n, folder) for n in h.body) for h in node.handlers)
            rest = (*node.body, *node.orelse, *node.finalbody)
            return handlers and all(_defines_only(n, folder) for n in rest)
    return False


def declarative(source: SourceFile, tree: ast.Module | None = None) -> bool:
    """Whether importing the file runs nothing of the user's own but definitions: its top level holds only imports
    of installed modules (none of its own folder), functions and classes without decorators or calls in their
    defaults, assignments and conditions without calls, and docstrings. Such a file's hand-written workload() can be
    called in pkroof's process under a deadline: the only code of the user's that runs is workload() itself."""
    tree = tree or source.tree()
    if tree is None:
        return False
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    bound |= {
        (a.asname or a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    if "dict" in bound:  # dict() is then the file's own
        return False
    folder = source.path.resolve().parent
    return all(_defines_only(node, folder) for node in tree.body)
