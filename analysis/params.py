"""A problem's parameters: the literals a user writes as inputs()' defaults or in SHAPES, and `--param name=value`
read by the type of the value it replaces.

A parameter is an int, a float, a bool, a str, None, a torch dtype written `torch.bfloat16`, or a tuple of these.
A torch dtype is held torch-free as a TorchDtype, its name as written ("torch.bfloat16"), so loading a problem and
keying its trace need no torch; inputs() gets the torch.dtype itself (Problem.inputs). An int is a count or a
dimension (m, tokens) and takes plain digits, positive where the value it replaces is (or where there is none);
a byte size (`size`, `*_bytes`) takes units (64MiB); a bool takes true/false/1/0; a torch dtype its name, with or
without `torch.` (bfloat16, torch.float8_e4m3fn) or pkroof's (bf16).
"""

from __future__ import annotations

import ast
import math
from typing import Any

from pkroof.rooflines.units import parse_size

NO_DEFAULT = object()  # a parameter without a default: a count, as the suite's are
TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "tf32": "float32", "fp8": "float8_e4m3fn"}
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


class TorchDtype(str):
    """A parameter that is a torch dtype, by its name as written ("torch.bfloat16"), without importing torch."""

    def torch(self) -> Any:
        """The torch.dtype it names; a ValueError of one line where torch has none of that name."""
        import torch

        found = getattr(torch, self.removeprefix("torch."), None)
        if not isinstance(found, torch.dtype):
            raise ValueError(f"{self} is not a torch dtype (torch.bfloat16, torch.float32, ...)")
        return found

    @classmethod
    def named(cls, name: str) -> TorchDtype:
        """'bfloat16', 'torch.bfloat16' or pkroof's 'bf16' as a TorchDtype."""
        bare = name.strip().removeprefix("torch.")
        bare = TORCH_NAMES.get(bare, bare)
        if not bare.isidentifier():
            raise ValueError(f"{name!r} is not the name of a torch dtype (bfloat16, float32, ...)")
        return cls(f"torch.{bare}")


def is_torch_dtype(value: Any) -> bool:
    """Whether `value` is a torch.dtype (told apart without importing torch)."""
    return type(value).__module__ == "torch" and type(value).__name__ == "dtype"


def is_byte_size(name: str) -> bool:
    """Whether a parameter is a number of bytes (`size`, `size_bytes`, any `*_bytes`), which takes parse_size's
    units; every other parameter counts things (m, n, k, tokens, hidden, experts) and takes plain digits."""
    return name == "size" or name.endswith("_bytes")


def literal(value: Any) -> Any:
    """`value` as a parameter: a torch.dtype as its TorchDtype, a list as a tuple; NO_DEFAULT where it is none of
    the literal types (an object a default made by code: inputs() keeps it, --param cannot set it)."""
    if is_torch_dtype(value):
        return TorchDtype(str(value))
    if isinstance(value, (list, tuple)):
        items = tuple(literal(v) for v in value)
        return NO_DEFAULT if NO_DEFAULT in items else items
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return NO_DEFAULT


def for_torch(value: Any) -> Any:
    """A parameter as inputs() takes it: a TorchDtype as its torch.dtype (in tuples too)."""
    if isinstance(value, TorchDtype):
        return value.torch()
    if isinstance(value, tuple):
        return tuple(for_torch(v) for v in value)
    return value


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """['m=8192', 'size_bytes=64MiB', 'dtype=bf16'] → {'m': '8192', 'size_bytes': 67108864, 'dtype': 'bf16'}: byte
    sizes (is_byte_size) read with parse_size's units, every other value kept as written, to be read by the type of
    the value it replaces (coerce, in Problem.params). A name given twice is an error, not the last one silently."""
    out: dict[str, Any] = {}
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
        else:
            out[name] = value
    return out


def _count(name: str, value: Any, like: Any) -> int:
    """An int parameter: plain digits (a minus sign too where the value it replaces is not positive)."""
    positive = like is NO_DEFAULT or like > 0
    text = str(value).strip() if not isinstance(value, bool) else ""
    digits = text.removeprefix("-") if not positive else text
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif text and digits.isascii() and digits.isdigit():
        number = int(text)
    else:
        number = None
    if number is None or (positive and number <= 0):
        if not positive:
            raise ValueError(f"--param {name}={value}: must be an integer in plain digits")
        raise ValueError(
            f"--param {name}={value}: must be a positive integer in plain digits ({name} is a count, not a byte "
            "size, so it takes no units such as KiB)"
        )
    return number


def coerce(name: str, value: Any, like: Any = NO_DEFAULT) -> Any:
    """`value` (as --param wrote it, or a value already of the type) as the parameter `name` whose value it
    replaces is `like` (NO_DEFAULT: none; a count). A ValueError of one line where it does not read as that type."""
    if is_byte_size(name) and isinstance(value, int) and not isinstance(value, bool):
        return value  # parse_params read its units
    text = str(value).strip()
    if isinstance(like, bool):
        if isinstance(value, bool) or text.lower() in (*_TRUE, *_FALSE):
            return value if isinstance(value, bool) else text.lower() in _TRUE
        raise ValueError(f"--param {name}={value}: must be true or false (or 1 or 0)")
    if isinstance(like, TorchDtype):
        try:
            return TorchDtype.named(str(value))
        except ValueError as e:
            raise ValueError(f"--param {name}: {e}") from None
    if isinstance(like, float):
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise ValueError(f"--param {name}={value}: must be a finite number (such as 1e-6)")
        return number
    if isinstance(like, str):
        return str(value)
    if like is None or isinstance(like, tuple):
        try:
            read = literal(ast.literal_eval(text)) if isinstance(value, str) else literal(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            read = text if like is None else NO_DEFAULT
        if isinstance(like, tuple) and not isinstance(read, tuple):
            raise ValueError(f"--param {name}={value}: must be a tuple such as {like!r}")
        if read is NO_DEFAULT:
            raise ValueError(f"--param {name}={value}: not a literal pkroof can pass (int, float, bool, str, tuple)")
        return read
    return _count(name, value, like)


def check(name: str, value: Any, where: str) -> Any:
    """A value SHAPES gives (`where` names it): one of the literal types, as a parameter (literal())."""
    found = literal(value)
    if found is NO_DEFAULT:
        raise ValueError(
            f"{where}: parameter {name} is {value!r}, not a literal (int, float, bool, str, None, a torch dtype such "
            "as torch.bfloat16, or a tuple of these)"
        )
    return found
