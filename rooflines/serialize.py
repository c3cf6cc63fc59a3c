"""The model's results as plain JSON data and back: one writer (`to_dict`) and one reader (`from_dict`) for every
result type, the version of the document they make in SCHEMA.

A result is a frozen dataclass. `to_dict` writes the names its class lists in `json_fields` where it lists them
(fields and the properties derived from them, in the document's order: Bound, Advice, CommOp), else its fields,
each value as JSON has it: an enum as its value, a tuple as a list, a mapping as an object, a nested result as its
own object, and a float that is not finite as null (strict JSON, RFC 8259, has neither NaN nor Infinity).

`from_dict(cls, data)` reads back a result whose document is its fields (Prediction, LinkTerm, Terms, SweepPoint,
NodesPoint), strictly: a missing or unknown key, or a name no enum knows, is a ValueError that says where; a key
`to_dict` derived (a property in `json_fields`) is not read. A Bound and its Advice are written from the Workload and
System they were made of, which the document names but does not hold: they cannot be read back whole.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

SCHEMA = "pkroof.bound/1"  # `pkroof bound --json`: a key removed or renamed, or a meaning changed, is a new version

T = TypeVar("T")


def finite(value: Any) -> Any:
    """`value` with every float that is not finite replaced by None, through dicts, lists and tuples."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _names(obj: Any) -> tuple[str, ...]:
    return getattr(obj, "json_fields", None) or tuple(f.name for f in dataclasses.fields(obj))


def to_dict(obj: Any) -> Any:
    """`obj` (a result, or a list, tuple or mapping of them) as JSON-ready data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {name: to_dict(getattr(obj, name)) for name in _names(obj)}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, Mapping):
        return {k.value if isinstance(k, Enum) else k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def from_dict(cls: type[T], data: Any, where: str = "") -> T:
    """The `cls` whose document `to_dict` wrote as `data`."""
    where = where or cls.__name__
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = {f.name for f in fields}
    unknown = set(data) - names - set(getattr(cls, "json_fields", ()))
    if unknown:
        raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    hints = typing.get_type_hints(cls)
    out = {}
    for f in fields:
        if f.name in data:
            out[f.name] = _read(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{where}.{f.name}: missing")
    return cls(**out)


def _read(hint: Any, value: Any, where: str) -> Any:
    """`value` as the type `hint` names: the reverse of to_dict for one field."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _read(inner, value, where)
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, where)
    if isinstance(hint, type) and issubclass(hint, Enum):
        if value not in {m.value for m in hint}:
            raise ValueError(f"{where}: {value!r} is not one of {', '.join(m.value for m in hint)}")
        return hint(value)
    if origin is tuple:
        return tuple(_read(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping):
        return {k: _read(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if hint is float:
        return math.nan if value is None else float(value)  # null: a number that was not finite
    return value
