"""pkroof: how fast could this multi-GPU kernel be on this node, how fast is it, and what to change first.

    import pkroof
    b = pkroof.bound("all-reduce", topology="h200x2", size="256MiB")   # b.t_roof_s, b.limiter, b.predictions
    r = pkroof.advise("gemm-reduce-scatter", shape="llama3-70b-tp8")  # r.mechanism, r.schedule, r.reason
    records = pkroof.profile("all-reduce", size="64M")                 # checked, timed, with the model's fields
    job = pkroof.trace("traces/", topology="hgx-h100-8")               # job.kernels, job.steps: DataFrames

The API (pkroof/api.py) is imported on first use, so `import pkroof` stays cheap: no torch, no pandas.
"""

__version__ = "0.1.0"

_API = (
    "bound",
    "advise",
    "profile",
    "trace",
    "sizes",
    "Bound",
    "Prediction",
    "Advice",
    "Terms",
    "LinkTerm",
    "CommOp",
)
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'pkroof' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
