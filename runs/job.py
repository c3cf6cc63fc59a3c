"""The job the traces come from: which rank each file is, whether they are one job, which ranks are missing, and
the traces that pkroof cannot analyse (no GPU kernels, an AMD GPU). Each problem is one line: a ValueError where the
result would be wrong, a note where it is partial."""

from __future__ import annotations

from dataclasses import dataclass, field

from .read import RankTrace, rank_from_name

_AMD = ("AMD", "Radeon", "Instinct")


@dataclass
class Job:
    traces: dict[int, RankTrace]  # by rank, ranks with GPU kernels only
    world_size: int
    devices: list[dict]
    default_group: tuple[str, int] | None  # (ranks "0,1,..", size) where the job has exactly one process group
    notes: list[str] = field(default_factory=list)


def _rocm(t: RankTrace) -> bool:
    names = [str(d.get("name", "")) for d in t.devices]
    return any(word in name for name in names for word in _AMD) or any(k.name.startswith("Cijk_") for k in t.kernels)


def _identity(t: RankTrace) -> dict[str, object]:
    """What every rank of one job shares."""
    d = t.distributed
    pgs = {str(pg.get("pg_name")): pg.get("pg_size") for pg in d.get("pg_config") or [] if isinstance(pg, dict)}
    return {
        "world size": d.get("world_size"),
        "backend": d.get("backend"),
        "NCCL version": d.get("nccl_version"),
        "GPU": t.devices[0].get("name") if t.devices else None,
        "process groups": pgs,
    }


def _same_job(traces: list[RankTrace]) -> None:
    first = _identity(traces[0])
    for t in traces[1:]:
        other = _identity(t)
        for key, value in first.items():
            theirs = other[key]
            if key == "process groups":  # each rank lists its own groups: those both list must agree in size
                clash = next((n for n in set(value) & set(theirs) if value[n] != theirs[n]), None)
                if clash is not None:
                    raise ValueError(
                        f"ranks from different jobs: {traces[0].path} and {t.path} give process group {clash!r} "
                        f"{value[clash]} and {theirs[clash]} ranks"
                    )
            elif value is not None and theirs is not None and value != theirs:
                raise ValueError(f"ranks from different jobs: {traces[0].path} has {key} {value}, {t.path} {theirs}")


def _ranks(traces: list[RankTrace], notes: list[str]) -> dict[int, RankTrace]:
    out: dict[int, RankTrace] = {}
    for t in traces:
        rank = t.rank if t.rank is not None else rank_from_name(t.path)
        if rank is None and len(traces) == 1:
            rank = 0
            notes.append(f"{t.path}: no distributedInfo rank; taken as rank 0")
        if rank is None:
            raise ValueError(
                f"{t.path}: which rank it is is not recorded (no distributedInfo, no 'rank-N' in its name)"
            )
        if rank in out:
            raise ValueError(
                f"ranks from different jobs, or one file twice: {out[rank].path} and {t.path} are rank {rank}"
            )
        t.rank = rank
        out[rank] = t
    return out


def _default_group(traces: list[RankTrace], world: int) -> tuple[str, int] | None:
    """The job's one process group where its traces list exactly one (then an operator without a recorded group ran
    in it), else None."""
    configs = [t.distributed.get("pg_config") for t in traces]
    if any(not isinstance(c, list) or len(c) != 1 for c in configs):
        return None
    pg = configs[0][0]
    ranks = pg.get("ranks") if isinstance(pg, dict) else None
    size = pg.get("pg_size") if isinstance(pg, dict) else None
    if not isinstance(size, int):
        return None
    return (",".join(map(str, ranks)) if isinstance(ranks, list) else str(pg.get("pg_name")), size)


def job_of(traces: list[RankTrace]) -> Job:
    """The job, or a ValueError of one line: a ROCm trace, no GPU kernels in any file, ranks of different jobs,
    one rank twice."""
    for t in traces:
        if _rocm(t):
            name = t.devices[0].get("name") if t.devices else "ROCm kernels"
            raise ValueError(f"{t.path}: a ROCm trace ({name}): pkroof trace reads NVIDIA (CUDA, NCCL) traces only")
    if not any(t.kernels for t in traces):
        which = traces[0].path if len(traces) == 1 else f"{len(traces)} traces"
        raise ValueError(f"{which}: no GPU kernels (a CPU-only trace?): profile with ProfilerActivity.CUDA")
    _same_job(traces)
    notes: list[str] = []
    ranks = _ranks(traces, notes)
    for r, t in sorted(ranks.items()):
        if not t.kernels:
            notes.append(f"rank {r}: no GPU kernels in {t.path}; left out")
            del ranks[r]
    worlds = {t.distributed.get("world_size") for t in traces} - {None}
    world = worlds.pop() if worlds else max(ranks) + 1
    if not worlds and not any(t.distributed.get("world_size") for t in traces):
        notes.append(f"no distributedInfo world size; taken as {world} from the ranks given")
    outside = sorted(r for r in ranks if r >= world)
    if outside:
        raise ValueError(f"rank {outside[0]} is outside the job's world size {world}: ranks from different jobs")
    missing = sorted(set(range(world)) - set(ranks))
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (f" … ({len(missing)} in all)" if len(missing) > 8 else "")
        notes.insert(0, f"partial result: {len(ranks)} of {world} ranks; missing ranks {shown}")
    devices = next((t.devices for t in ranks.values() if t.devices), [])
    return Job(dict(sorted(ranks.items())), world, devices, _default_group(list(ranks.values()), world), notes)
