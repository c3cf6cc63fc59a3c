"""Versioned JSON for Topology, strict on read: unknown or missing keys, wrong types and bad values are refused.

Numbers are finite and within physical ranges (NaN, Infinity, 1e400 or a 400-digit integer name their field);
a key given twice, or nesting deeper than a topology has, is refused too; what is written is strict JSON.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Any

from .model import Topology

SCHEMA = "pkroof.topology/1"


class TopologyError(ValueError):
    """A topology file that cannot be used; the message names the offending field."""


def to_dict(topology: Topology) -> dict[str, Any]:
    return {"schema": SCHEMA, **dataclasses.asdict(topology)}


def dumps(topology: Topology) -> str:
    return json.dumps(to_dict(topology), indent=2, allow_nan=False) + "\n"


class _Bad:
    """A number JSON can spell but no topology holds (NaN, Infinity, 1e400, hundreds of digits): kept until the
    decoder knows which field it is in."""

    def __init__(self, text: str, why: str) -> None:
        self.text, self.why = text, why

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 24 else f"{self.text[:12]}...({len(self.text)} characters)"
        return f"{shown} ({self.why})"


MAX_DIGITS = 19  # a whole number of more digits than a 64-bit one holds is no count, size or rate
# physical ranges by the field's name: far above any machine there is, far below what breaks the arithmetic
RANGES = (
    ("_Bps", 1e15, "bytes per second (1 PB/s)"),
    ("flops", 1e18, "FLOP/s (1 EFLOP/s for one GPU)"),
    ("_bytes", 1e18, "bytes (1 EB)"),
    ("_s", 1e6, "seconds (11 days)"),
)
ANY_NUMBER = 1e21  # any other number (a curve's x, a relative error, a count)


def _constant(text: str) -> _Bad:
    return _Bad(text, "not a finite number")


def _float(text: str) -> float | _Bad:
    value = float(text)
    return value if math.isfinite(value) else _Bad(text, "out of range for a number")


def _int(text: str) -> int | _Bad:
    if len(text.lstrip("-")) > MAX_DIGITS:
        return _Bad(text, f"more than {MAX_DIGITS} digits")
    return int(text)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise TopologyError(f"{twice}: the key appears twice in one object (the last would silently win)")
    return dict(pairs)


def _in_range(path: str, value: float) -> None:
    names = re.sub(r"\[\d+\]", "", path).split(".")[-2:]
    for suffix, limit, unit in RANGES:
        if any(n.endswith(suffix) or (suffix == "flops" and "flops" in n) for n in names):
            if abs(value) > limit:
                raise TopologyError(f"{path}: {value!r} is beyond any machine (at most {limit:g} {unit})")
            return
    if abs(value) > ANY_NUMBER:
        raise TopologyError(f"{path}: {value!r} is beyond any machine (at most {ANY_NUMBER:g})")


def parse(text: str) -> Any:
    """JSON text as plain data, strictly: NaN, Infinity and out-of-range numbers are kept as markers that the
    decoder refuses naming their field; a key twice in one object or nesting too deep is a TopologyError."""
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int, object_pairs_hook=_pairs)
    except RecursionError:
        raise TopologyError("nested too deeply to be a topology") from None


def _decode(hint: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        (inner,) = [o for o in options if o is not type(None)]
        return _decode(inner, value, path)
    if origin is tuple:
        (item_type, _) = typing.get_args(hint)
        if not isinstance(value, (list, tuple)):
            raise TopologyError(f"{path}: expected a list, got {type(value).__name__}")
        return tuple(_decode(item_type, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        _, value_type = typing.get_args(hint)
        if not isinstance(value, dict):
            raise TopologyError(f"{path}: expected an object, got {type(value).__name__}")
        return {k: _decode(value_type, v, f"{path}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _record(hint, value, path)
    if hint is bool:
        if not isinstance(value, bool):
            raise TopologyError(f"{path}: expected true or false, got {value!r}")
        return value
    if isinstance(value, _Bad):
        raise TopologyError(f"{path}: {value!r}")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise TopologyError(f"{path}: expected a whole number, got {value!r}")
        _in_range(path, value)
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise TopologyError(f"{path}: expected a finite number, got {value!r}")
        _in_range(path, value)
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise TopologyError(f"{path}: expected a string, got {value!r}")
        return value
    raise AssertionError(f"no decoder for {hint}")


def _record(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise TopologyError(f"{path or 'topology'}: expected an object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    prefix = f"{path}." if path else ""
    for key in data:
        if key not in fields:
            raise TopologyError(f"{prefix}{key}: unknown key (known: {', '.join(fields)})")
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required:
                raise TopologyError(f"{prefix}{name}: missing")
            continue
        kwargs[name] = _decode(hints[name], data[name], prefix + name)
    try:
        return cls(**kwargs)
    except ValueError as e:
        raise TopologyError(f"{prefix}{e}") from None


def decode(cls: type, data: Any, path: str = "") -> Any:
    """Any record of the topology model from plain JSON data, as strictly as a whole file."""
    return _record(cls, data, path)


def from_dict(data: Any) -> Topology:
    if not isinstance(data, dict):
        raise TopologyError(f"topology: expected a JSON object, got {type(data).__name__}")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise TopologyError(f"schema: expected {SCHEMA!r}, got {schema!r}")
    return _record(Topology, {k: v for k, v in data.items() if k != "schema"}, "")


def load(path: str | Path) -> Topology:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TopologyError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise TopologyError(f"{path}: not JSON (not UTF-8 text)") from None
    try:
        return from_dict(parse(text))
    except json.JSONDecodeError as e:
        raise TopologyError(f"{path}: not JSON (line {e.lineno}: {e.msg})") from None
    except TopologyError as e:
        raise TopologyError(f"{path}: {e}") from None


def dump(topology: Topology, path: str | Path) -> None:
    Path(path).write_text(dumps(topology))
