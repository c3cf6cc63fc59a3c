"""Read nccl-tests' text output as its `*_perf` programs print it (NVIDIA/nccl-tests src/util.cu): the header lines
(`# nThread 1 nGpus 2 minBytes ... iters: 20 ... graph: 0`, `#  Rank  0 Group  0 Pid ... on HOST device  0 [...]
NAME`), the table header (`#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw
#wrong`, older versions without `root` or `redop`, `error` for `#wrong`) and one row per size, out of place then in
place. A file may hold several runs (each from its `# nThread` line); NCCL's own log lines between are skipped.

Pure text work: no torch, no devices. A line that cannot be read is a ValueError naming the file and the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pkroof.rooflines import Collective, bus_bandwidth_factor

PROGRAMS = {  # nccl-tests' program (src/*.cu) → the collective it times
    "all_reduce": Collective.ALL_REDUCE,
    "all_gather": Collective.ALL_GATHER,
    "reduce_scatter": Collective.REDUCE_SCATTER,
    "alltoall": Collective.ALL_TO_ALL,
    "broadcast": Collective.BROADCAST,
    "reduce": Collective.REDUCE,
    "gather": Collective.GATHER,
    "scatter": Collective.SCATTER,
    "sendrecv": Collective.SEND_RECV,
}
_PROGRAM = re.compile(r"#\s*Collective test starting:\s*(\w+?)(?:_perf)?(?:_mpi)?\s*$")
_VERSION = re.compile(r"nccl-library=(\d+)")
_NCCL_LINE = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_RANK = re.compile(  # "#  Rank  0 Group  0 Pid   1000 on   h200node device  0 [0000:18:00] NVIDIA H200"
    r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$"
)
_TAG = re.compile(r"\[\d+(?:,\d+)*\](?:<std(?:out|err)>:)?")  # mpirun --tag-output's [1,0]<stdout>: and [0]


@dataclass(frozen=True)
class Row:
    line: int
    size_bytes: int
    count: int
    dtype: str
    out_of_place_s: float | None  # seconds per call (nccl-tests prints µs)
    in_place_s: float | None
    out_of_place_busbw_GBps: float | None
    in_place_busbw_GBps: float | None
    out_of_place_algbw_GBps: float | None

    @property
    def fastest_s(self) -> float:
        """The faster of out of place and in place: NCCL's best at this size."""
        return min(t for t in (self.out_of_place_s, self.in_place_s) if t is not None)


@dataclass(frozen=True)
class Run:
    """One `*_perf` run: its collective, its ranks (rank → (host, GPU name)), settings and rows."""

    path: Path
    line: int  # where its `# nThread` line is
    collective: Collective
    ranks: dict[int, tuple[str, str]]
    num_ranks: int
    iters: int | None
    graph: bool
    nccl_version: str | None
    rows: tuple[Row, ...]

    @property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(host for host, _ in self.ranks.values()))

    @property
    def gpu_names(self) -> list[str]:
        return list(dict.fromkeys(name for _, name in self.ranks.values()))


def _collective_from_name(path: Path) -> Collective | None:
    """The collective a file's name says it holds (all_reduce_perf.txt, all-reduce.log), where it says only one."""
    stem = path.name.lower().replace("-", "_")
    spans = [
        (m.start(1), m.end(1), c)
        for program, c in PROGRAMS.items()
        for m in re.finditer(rf"(?:^|[^a-z])({program})(?:[^a-z]|$)", stem)
    ]
    # a program's name inside a longer one's is not a match of its own (reduce in all_reduce)
    found = {c for a, b, c in spans if not any(x <= a and b <= y and (x, y) != (a, b) for x, y, _ in spans)}
    return found.pop() if len(found) == 1 else None


def _nccl_version(code: str) -> str:
    """NCCL_VERSION_CODE as a version: 22803 → 2.28.3 (major·10000 + minor·100 + patch since 2.9)."""
    n = int(code)
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}" if n >= 20900 else f"{n // 1000}.{n // 100 % 10}.{n % 100}"


def _header_columns(text: str) -> list[str] | None:
    """The column names of a table header line (`#  size  count  type ...`), else None."""
    words = text.lstrip("#").split()
    return words if words[:2] == ["size", "count"] else None


def _number(word: str, where: str) -> float | None:
    if word in ("N/A", "-"):
        return None
    try:
        return float(word)
    except ValueError:
        raise ValueError(f"{where}: {word!r} is not a number") from None


class _Section:
    def __init__(self, path: Path, line: int, settings: str) -> None:
        self.path, self.line = path, line
        self.collective: Collective | None = None
        self.ranks: dict[int, tuple[str, str]] = {}
        self.columns: list[str] | None = None
        self.rows: list[Row] = []
        self.nccl: str | None = None
        iters = re.search(r"(?<!warmup )(?<!agg )\biters:\s*(\d+)", settings)
        self.iters = int(iters.group(1)) if iters else None
        graph = re.search(r"\bgraph:\s*(\d+)", settings)
        self.graph = bool(graph and int(graph.group(1)))

    def row(self, number: int, words: list[str]) -> None:
        where = f"{self.path}:{number}"
        if self.columns is None:
            raise ValueError(f"{where}: a row before the table's header line (# size count type ...)")
        cols = self.columns
        if "cputime" in cols:
            raise ValueError(f"{where}: the times are CPU times (nccl-tests -C 1); run it without -C for GPU times")
        times = [i for i, c in enumerate(cols) if c == "time"]
        if len(words) < max(times) + 1:
            raise ValueError(f"{where}: {len(words)} columns, the header names {len(cols)} ({' '.join(cols)})")
        try:
            size, count = int(words[0]), int(words[1])
        except ValueError:
            raise ValueError(f"{where}: size and count must be whole numbers, got {words[0]!r} {words[1]!r}") from None
        values = {}
        for side, at in zip(("out", "in"), times, strict=False):
            t = _number(words[at], where)
            busbw = _number(words[at + 2], where) if cols[at + 2 : at + 3] == ["busbw"] else None
            algbw = _number(words[at + 1], where) if cols[at + 1 : at + 2] == ["algbw"] else None
            wrong = words[at + 3] if at + 3 < len(words) and cols[at + 3 : at + 4] == ["#wrong"] else None
            if wrong not in (None, "N/A") and _number(wrong, where):
                raise ValueError(
                    f"{where}: nccl-tests counted {wrong} wrong elements {side} of place at {size} B: not the times "
                    "of a correct run"
                )
            if t is not None and not t > 0:
                raise ValueError(f"{where}: a time of {t} µs")
            values[side] = (None if t is None else t * 1e-6, busbw, algbw)
        out, inp = values.get("out", (None, None, None)), values.get("in", (None, None, None))
        if out[0] is None and inp[0] is None:
            raise ValueError(f"{where}: no time in this row")
        dtype = words[2] if cols[2:3] == ["type"] else ""
        self.rows.append(Row(number, size, count, dtype, out[0], inp[0], out[1], inp[1], out[2]))

    def run(self, fallback: Collective | None) -> Run:
        where = f"{self.path}:{self.line}"
        collective = self.collective or fallback
        if collective is None:
            raise ValueError(
                f"{where}: cannot tell which collective this run times (no '# Collective test starting:' line, and "
                "the file's name names none): name the file after its test, e.g. all_reduce_perf.txt"
            )
        rows = tuple(r for r in self.rows if r.size_bytes > 0)
        if not rows:
            raise ValueError(f"{where}: no timed row of a positive size in this run")
        sizes = [r.size_bytes for r in rows]
        if len(set(sizes)) != len(sizes):
            twice = next(s for s in sizes if sizes.count(s) > 1)
            raise ValueError(f"{self.path}: size {twice} appears twice in one run (two runs printed into one table?)")
        return Run(
            self.path, self.line, collective, dict(self.ranks), self._num_ranks(collective, rows),
            self.iters, self.graph, self.nccl, rows,
        )  # fmt: skip

    def _num_ranks(self, collective: Collective, rows: tuple[Row, ...]) -> int:
        """The ranks its `#  Rank` lines list; without them, the ones nccl-tests' bus factor says (busbw / algbw at
        the largest size), where that factor depends on the count of ranks."""
        if self.ranks:
            return len(self.ranks)
        last = rows[-1]
        depends = bus_bandwidth_factor(collective, 2) != bus_bandwidth_factor(collective, 3)
        if depends and last.out_of_place_busbw_GBps and last.out_of_place_algbw_GBps:
            ratio = last.out_of_place_busbw_GBps / last.out_of_place_algbw_GBps
            off = sorted((abs(bus_bandwidth_factor(collective, n) / ratio - 1), n) for n in range(2, 1025))
            if off[0][0] < 1e-3 and off[1][0] > 2e-3:  # one count of ranks fits the printed ratio, and no other
                return off[0][1]
        raise ValueError(
            f"{self.path}:{self.line}: no '#  Rank' lines to count its ranks by, and busbw / algbw does not tell "
            "them: keep the run's header lines in the file"
        )


def parse(path: Path) -> list[Run]:
    """Every run in one file of nccl-tests output; a ValueError of one line naming the file and line otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ValueError(f"{path}: cannot read it ({e.strerror})") from None
    sections: list[_Section] = []
    program: Collective | None = None
    version: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = _TAG.sub(" ", raw) if _TAG.match(raw.lstrip()) else raw  # tags also land mid-line
        stripped = line.strip()
        if not stripped:
            continue
        if (found := _VERSION.search(line)) is not None:
            version = _nccl_version(found.group(1))
        if stripped.startswith("#"):
            if (match := _PROGRAM.match(stripped)) is not None:
                name = match.group(1)
                if name not in PROGRAMS:
                    raise ValueError(f"{path}:{number}: {name}_perf is not a collective pkroof models")
                program = PROGRAMS[name]
            elif re.match(r"#\s*nThread\b", stripped):
                sections.append(_Section(path, number, stripped))
                sections[-1].collective, sections[-1].nccl = program, version
                program = None
            elif (rank := _RANK.match(stripped)) is not None and sections:
                r = int(rank.group(1))
                if r in sections[-1].ranks:
                    raise ValueError(
                        f"{path}:{number}: rank {r} is listed twice: each process ran alone (nccl-tests built "
                        "without MPI=1, started by mpirun?)"
                    )
                sections[-1].ranks[r] = (rank.group(2), rank.group(4))
            elif (columns := _header_columns(stripped)) is not None:
                if not sections:
                    sections.append(_Section(path, number, ""))
                sections[-1].columns = columns
            continue
        if (match := _NCCL_LINE.search(line)) is not None and sections:
            sections[-1].nccl = match.group(1)
        if stripped[0].isdigit():
            if not sections:
                raise ValueError(f"{path}:{number}: a row before any nccl-tests header (# nThread ...)")
            sections[-1].row(number, stripped.split())
    if not sections:
        raise ValueError(f"{path}: no nccl-tests run in it (no '# nThread' line)")
    fallback = _collective_from_name(path) if len(sections) == 1 else None
    return [s.run(fallback) for s in sections]
