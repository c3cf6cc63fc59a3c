"""The job the traces come from: which rank each file is, whether they are one job, which ranks are missing, and
the traces that pkroof cannot analyse (no GPU kernels, an AMD GPU). Each problem is one line: a ValueError where the
result would be wrong, a note where it is partial.

Files are checked one at a time as they are read (each against the first), so that only one rank's events are in
memory at once; `finish` then checks the job as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .read import RankTrace, rank_from_name

_AMD = ("AMD", "Radeon", "Instinct")


@dataclass(frozen=True)
class RankMeta:
    """What one file says about its job, kept after its events are dropped."""

    path: str
    rank: int
    distributed: dict
    devices: list[dict]
    num_kernels: int

    @property
    def identity(self) -> dict[str, object]:
        """What every rank of one job shares."""
        d = self.distributed
        pgs = {str(pg.get("pg_name")): pg.get("pg_size") for pg in d.get("pg_config") or [] if isinstance(pg, dict)}
        return {
            "world size": d.get("world_size"),
            "backend": d.get("backend"),
            "NCCL version": d.get("nccl_version"),
            "GPU": self.devices[0].get("name") if self.devices else None,
            "process groups": pgs,
        }

    @property
    def default_group(self) -> tuple[str, int] | None:
        """(ranks "0,1,..", size) of the job's one process group where this rank's trace lists exactly one (an
        operator without a recorded group then ran in it), else None."""
        config = self.distributed.get("pg_config")
        if not isinstance(config, list) or len(config) != 1 or not isinstance(config[0], dict):
            return None
        pg = config[0]
        ranks, size = pg.get("ranks"), pg.get("pg_size")
        if not isinstance(size, int):
            return None
        return (",".join(map(str, ranks)) if isinstance(ranks, list) else str(pg.get("pg_name")), size)


def _rocm(t: RankTrace) -> bool:
    """An AMD device, a Tensile (Cijk_) kernel or a HIP runtime call."""
    names = [str(d.get("name", "")) for d in t.devices]
    amd = any(word in name for name in names for word in _AMD)
    return amd or t.hip or any(k.name.startswith("Cijk_") for k in t.kernels)


def _same_job(first: RankMeta, other: RankMeta) -> None:
    mine, theirs = first.identity, other.identity
    for key, value in mine.items():
        their = theirs[key]
        if key == "process groups":  # each rank lists its own groups: those both list must agree in size
            clash = next((n for n in sorted(set(value) & set(their)) if value[n] != their[n]), None)
            if clash is not None:
                raise ValueError(
                    f"ranks from different jobs: {first.path} and {other.path} give process group {clash!r} "
                    f"{value[clash]} and {their[clash]} ranks"
                )
        elif value is not None and their is not None and value != their:
            raise ValueError(f"ranks from different jobs: {first.path} has {key} {value}, {other.path} {their}")


@dataclass
class JobCheck:
    """The files read so far: each new one checked against the first and against the ranks already seen."""

    num_files: int
    metas: dict[int, RankMeta] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, t: RankTrace) -> RankMeta:
        """`t`'s rank and what it says about the job, or a ValueError of one line: a ROCm trace, ranks of
        different jobs, one rank twice, a rank no file name or distributedInfo gives."""
        if _rocm(t):
            name = t.devices[0].get("name") if t.devices else "HIP calls" if t.hip else "ROCm kernels"
            raise ValueError(f"{t.path}: a ROCm trace ({name}): pkroof trace reads NVIDIA (CUDA, NCCL) traces only")
        rank = t.rank if t.rank is not None else rank_from_name(t.path)
        if rank is None and self.num_files == 1:
            rank = 0
            self.notes.append(f"{t.path}: no distributedInfo rank; taken as rank 0")
        if rank is None:
            raise ValueError(
                f"{t.path}: which rank it is is not recorded (no distributedInfo, no 'rank-N' in its name)"
            )
        if rank in self.metas:
            first = self.metas[rank].path
            raise ValueError(f"ranks from different jobs, or one file twice: {first} and {t.path} are rank {rank}")
        if t.dropped:
            self.notes.append(
                f"{t.path}: {t.dropped} events dropped: no or a non-finite time, or a duration negative or over a day"
            )
        meta = RankMeta(t.path, rank, t.distributed, t.devices, len(t.kernels))
        if self.metas:
            _same_job(next(iter(self.metas.values())), meta)
        self.metas[rank] = meta
        return meta

    def finish(self) -> tuple[list[int], int, list[str]]:
        """(the ranks with GPU kernels, the world size, notes), or a ValueError where no file has a GPU kernel or
        a rank lies outside the world size. Missing ranks make a partial result, said in the first note."""
        metas = self.metas
        if not any(m.num_kernels for m in metas.values()):
            which = next(iter(metas.values())).path if len(metas) == 1 else f"{len(metas)} traces"
            raise ValueError(f"{which}: no GPU kernels (a CPU-only trace?): profile with ProfilerActivity.CUDA")
        notes = list(self.notes)
        ranks = sorted(r for r, m in metas.items() if m.num_kernels)
        notes += [
            f"rank {r}: no GPU kernels in {m.path}; left out" for r, m in sorted(metas.items()) if not m.num_kernels
        ]
        worlds = {m.distributed.get("world_size") for m in metas.values()} - {None}
        world = worlds.pop() if worlds else max(metas) + 1
        if not worlds and not any(m.distributed.get("world_size") for m in metas.values()):
            notes.append(f"no distributedInfo world size; taken as {world} from the ranks given")
        outside = sorted(r for r in metas if r >= world)
        if outside:
            raise ValueError(f"rank {outside[0]} is outside the job's world size {world}: ranks from different jobs")
        missing = sorted(set(range(world)) - set(ranks))
        if missing:
            shown = ", ".join(map(str, missing[:8])) + (f" … ({len(missing)} in all)" if len(missing) > 8 else "")
            notes.insert(0, f"partial result: {len(ranks)} of {world} ranks; missing ranks {shown}")
        return ranks, world, notes
