"""The route of one `pkroof` command: the pkroof files and distinct functions it passes through (cProfile, in every
process that runs pkroof code: this one, and the process a user's file is analysed in), the processes it starts,
and how often the user's file is opened.

    python benchmarks/model/bound_route.py ROOT CHILD_TARGET -- bound FILE -t h200x2 -n 2

ROOT: the checkout whose pkroof is installed (files are counted under its rooms). CHILD_TARGET ("module:function",
or "-"): the function a process of its own analyses the file in, profiled there too (the fork server imports this
script as __mp_main__ and wraps it before any rank starts). Processes started are counted where this process starts
them: the fork server and its resource tracker (spawned), rank or analysis processes (each a guard and the worker
it forks), subprocesses, os.fork.
"""

import cProfile
import functools
import importlib
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

ROOMS = ("analysis", "kernels", "pkroof", "profilers", "records", "reports", "rooflines", "runtime", "topology")
STATS = os.environ.setdefault("ROUTE_STATS", tempfile.mkdtemp(prefix="route-"))
OPENS: list[str] = []


def _count_opens(event: str, args: tuple) -> None:
    if event == "open" and isinstance(args[0], str | bytes | os.PathLike):
        OPENS.append(os.path.realpath(os.fsdecode(args[0])))


sys.addaudithook(_count_opens)


def _profiled_in_child(target: str) -> None:
    """Wrap `module:function` so that where it runs (a child) its profile and the files it opened are written."""
    module_name, _, name = target.partition(":")
    module = importlib.import_module(module_name)
    fn = getattr(module, name)

    @functools.wraps(fn)
    def profiled(*args, **kwargs):
        prof = cProfile.Profile()
        prof.enable()
        try:
            return fn(*args, **kwargs)
        finally:
            prof.disable()
            prof.dump_stats(os.path.join(STATS, f"child-{os.getpid()}.prof"))
            Path(STATS, f"child-{os.getpid()}.opens").write_text("\n".join(OPENS))

    setattr(module, name, profiled)


if __name__ == "__mp_main__" and sys.argv[2] != "-":  # the fork server, which imports this file as __mp_main__
    _profiled_in_child(sys.argv[2])


def _counted(counts: dict[str, int]) -> None:
    import multiprocessing.popen_forkserver
    import multiprocessing.util

    def wrap(owner: object, attr: str, what: str) -> None:
        orig = getattr(owner, attr)

        def counted(*a, **k):
            counts[what] += 1
            return orig(*a, **k)

        setattr(owner, attr, counted)

    wrap(multiprocessing.util, "spawnv_passfds", "fork server and its resource tracker")
    wrap(multiprocessing.popen_forkserver.Popen, "__init__", "rank or analysis processes")
    wrap(subprocess.Popen, "__init__", "subprocesses")
    wrap(os, "fork", "os.fork")


def main() -> None:
    root = Path(sys.argv[1]).resolve()
    args = sys.argv[4:]
    counts = dict.fromkeys(
        ("fork server and its resource tracker", "rank or analysis processes", "subprocesses", "os.fork"), 0
    )
    _counted(counts)
    from pkroof.cli import app

    prof = cProfile.Profile()
    code = 0
    prof.enable()
    try:
        app(args, standalone_mode=False)
    except SystemExit as e:
        code = e.code
    prof.disable()
    prof.dump_stats(os.path.join(STATS, "parent.prof"))
    user_file = os.path.realpath(next(a for a in args if a.endswith(".py")))
    opened = {"parent": OPENS.count(user_file)}
    for opens in Path(STATS).glob("child-*.opens"):
        opened["child"] = opens.read_text().split("\n").count(user_file)
    per: dict[str, tuple[set, set]] = {}
    for stats_file in sorted(Path(STATS).glob("*.prof")):
        files, funcs = per.setdefault(stats_file.stem.partition("-")[0], (set(), set()))
        for fn, line, name in pstats.Stats(str(stats_file)).stats:
            p = Path(fn)
            if not p.is_file() or p.suffix != ".py":
                continue
            try:
                rel = str(p.resolve().relative_to(root))
            except ValueError:
                continue
            if rel.split("/")[0] in ROOMS:  # not the user's file, tests/, tools/
                files.add(rel)
                funcs.add((rel, line, name))
    all_files = set().union(*(f for f, _ in per.values()))
    all_funcs = set().union(*(g for _, g in per.values()))
    each = ", ".join(f"{k}: {len(f)} files, {len(g)} functions" for k, (f, g) in per.items())
    print(
        f"exit {code}; pkroof files {len(all_files)}, distinct functions {len(all_funcs)} ({each}); "
        f"started {counts}; the user's file opened {opened}",
        file=sys.stderr,
    )
    for f in sorted(all_files):
        print(f"    {f} {sum(1 for g in all_funcs if g[0] == f)}", file=sys.stderr)


if __name__ == "__main__":
    main()
