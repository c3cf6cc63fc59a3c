"""Versioned JSON for Topology, strict on read: unknown or missing keys, wrong types and bad values are refused."""

from __future__ import annotations

import dataclasses
import json
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
    return json.dumps(to_dict(topology), indent=2) + "\n"


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
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise TopologyError(f"{path}: expected a whole number, got {value!r}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TopologyError(f"{path}: expected a number, got {value!r}")
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
        text = path.read_text()
    except OSError as e:
        raise TopologyError(f"{path}: cannot read ({e.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TopologyError(f"{path}: not JSON (line {e.lineno}: {e.msg})") from None
    try:
        return from_dict(data)
    except TopologyError as e:
        raise TopologyError(f"{path}: {e}") from None


def dump(topology: Topology, path: str | Path) -> None:
    Path(path).write_text(dumps(topology))
