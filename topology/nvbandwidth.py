"""Read nvbandwidth's output (NVIDIA/nvbandwidth): its text (`Running NAME.`, a description line such as
`memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)`, a matrix with `N/A` on the diagonal, `SUM NAME value`) and its
JSON (`-j`: {"nvbandwidth": {"testcases": [{"name", "status", "bandwidth_description", "bandwidth_matrix"}]}}).

Pure text work: no torch, no devices. Anything that cannot be read is a ValueError naming the file (and line).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

_RUNNING = re.compile(r"^Running (\w+)\.\s*$")


@dataclass(frozen=True)
class Testcase:
    name: str  # "device_to_device_memcpy_read_ce", ...
    description: str  # "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"
    matrix: tuple[tuple[float | None, ...], ...]  # GB/s; None where nvbandwidth printed N/A
    line: int  # where it starts (0 in JSON)

    @property
    def values_GBps(self) -> list[float]:
        return [v for row in self.matrix for v in row if v is not None and v > 0]


@dataclass(frozen=True)
class Output:
    path: Path
    version: str | None
    driver: str | None
    devices: tuple[str, ...]  # "Device 0: NVIDIA H100 80GB HBM3 (00000000:1b:00)" → the name
    buffer_bytes: int | None  # the copy size, where the output says it
    testcases: dict[str, Testcase]


def _cell(word: str, where: str) -> float | None:
    if word == "N/A":
        return None
    try:
        return float(word)
    except ValueError:
        raise ValueError(f"{where}: {word!r} is not a bandwidth") from None


def _text(path: Path, text: str) -> Output:
    lines = text.splitlines()
    version = driver = None
    devices: list[str] = []
    cases: dict[str, Testcase] = {}
    buffer = None
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("nvbandwidth Version:"):
            version = line.split(":", 1)[1].strip()
        elif line.startswith("Driver Version:"):
            driver = line.split(":", 1)[1].strip()
        elif (device := re.match(r"Device \d+: (.+?)(?: \([0-9a-fA-F:.]+\))?$", line)) is not None:
            devices.append(device.group(1))
        elif (size := re.search(r"[Bb]uffer ?[Ss]ize[:=]? *(\d+) *(MiB|B)?", line)) is not None:
            buffer = int(size.group(1)) * (1 << 20 if size.group(2) == "MiB" else 1)
        elif (running := _RUNNING.match(line)) is not None:
            case, i = _matrix(path, lines, i, running.group(1))
            if case is not None:
                cases[case.name] = case
            continue
        i += 1
    if not cases:
        raise ValueError(f"{path}: no nvbandwidth testcase in it (no 'Running NAME.' followed by a matrix)")
    return Output(path, version, driver, tuple(devices), buffer, cases)


def _matrix(path: Path, lines: list[str], start: int, name: str) -> tuple[Testcase | None, int]:
    """The testcase that starts at line `start` ('Running NAME.'), and the line after it. A testcase nvbandwidth
    waived or failed (no matrix follows) is None."""
    i = start + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or "bandwidth" not in lines[i] or _RUNNING.match(lines[i].strip()):
        return None, i  # waived, or an error in place of a matrix
    description = lines[i].strip()
    columns = lines[i + 1].split() if i + 1 < len(lines) else []
    if not columns or not all(c.isdigit() for c in columns):
        raise ValueError(f"{path}:{i + 2}: expected the matrix's column numbers after {description!r}")
    rows, i = [], i + 2
    while i < len(lines) and lines[i].split() and lines[i].split()[0].isdigit():
        words = lines[i].split()
        if len(words) != len(columns) + 1:
            raise ValueError(f"{path}:{i + 1}: {len(words) - 1} values in a row of {len(columns)} columns")
        rows.append(tuple(_cell(w, f"{path}:{i + 1}") for w in words[1:]))
        i += 1
    if not rows:
        raise ValueError(f"{path}:{i + 1}: {name} has a header but no rows")
    return Testcase(name, description, tuple(rows), start + 1), i


def _json(path: Path, data: object) -> Output:
    body = data.get("nvbandwidth") if isinstance(data, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("testcases"), list):
        raise ValueError(f"{path}: JSON without nvbandwidth.testcases (not nvbandwidth -j output)")
    cases = {}
    for k, case in enumerate(body["testcases"]):
        where = f"{path}: testcases[{k}]"
        if not isinstance(case, dict) or not isinstance(case.get("name"), str):
            raise ValueError(f"{where}: a testcase without a name")
        if case.get("status") != "Passed" or "bandwidth_matrix" not in case:
            continue  # waived, not found, or an error: nothing measured
        matrix = case["bandwidth_matrix"]
        if not isinstance(matrix, list) or not all(isinstance(r, list) for r in matrix):
            raise ValueError(f"{where}.bandwidth_matrix: expected a list of rows")
        rows = tuple(tuple(_cell(str(v), f"{where}.bandwidth_matrix") for v in r) for r in matrix)
        cases[case["name"]] = Testcase(case["name"], str(case.get("bandwidth_description", "")), rows, 0)
    if not cases:
        raise ValueError(f"{path}: no testcase nvbandwidth passed")
    buffer = body.get("bufferSize")  # MiB in nvbandwidth's later versions, bytes in its first ones
    buffer_bytes = None
    if isinstance(buffer, (int, float)) and not isinstance(buffer, bool) and buffer > 0:
        buffer_bytes = int(buffer) if buffer >= 1 << 20 else int(buffer) << 20
    version = body.get("version") or body.get("git_version")
    driver = body.get("Driver Version")
    return Output(path, str(version) if version else None, str(driver) if driver else None, (), buffer_bytes, cases)


def looks_like(text: str) -> bool:
    """Whether a file's text is nvbandwidth's output (text or JSON)."""
    return "nvbandwidth" in text[:4096] or bool(re.search(r"^Running \w+_(?:ce|sm)\.$", text, re.MULTILINE))


def parse(path: Path) -> Output:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ValueError(f"{path}: cannot read it ({e.strerror})") from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON (line {e.lineno}: {e.msg})") from None
        return _json(path, data)
    return _text(path, text)
