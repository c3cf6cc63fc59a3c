"""A problem's parameters of any literal type a user writes (issue 32 item 1): int, float, bool, str and a torch dtype
written `torch.bfloat16` as inputs()' defaults, read from the source without running the file, set with
`-p name=value` by the default's type, and a parameter named `dtype` answering `--dtype`.

Every count below is derived by hand from the file: an all-reduce of x [tokens, hidden] (nccl-tests' size: the
buffer), `scaled` adds x @ w (2·tokens·hidden·hidden FLOPs), w [hidden, hidden] is read once.
"""

import json

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from pkroof.analysis.catalogue import from_source, load  # noqa: E402
from pkroof.analysis.params import TorchDtype  # noqa: E402
from pkroof.analysis.source import read  # noqa: E402
from pkroof.cli import app  # noqa: E402

FILE = """
import torch
import torch.distributed as dist


def inputs(rank, world_size, *, seed, device, tokens=64, hidden=128, dtype="float32", eps=1e-6, scaled=True,
           wdtype=torch.bfloat16):
    x = torch.zeros(tokens, hidden, device=device, dtype=getattr(torch, dtype))
    w = torch.zeros(hidden, hidden, device=device, dtype=wdtype)
    return x, w, eps, scaled


def reference(x, w, eps, scaled):
    out = x.clone()
    dist.all_reduce(out)
    if scaled:
        out = out @ w.to(out.dtype)
    return out * eps
"""
TOKENS, HIDDEN = 64, 128


@pytest.fixture
def typed(tmp_path, monkeypatch):
    monkeypatch.setenv("PKROOF_TRACE_CACHE", "off")
    path = tmp_path / "typed.py"
    path.write_text(FILE)
    return path


def _bound(path, *args):
    done = CliRunner().invoke(app, ["bound", str(path), "-t", "h200x2", "-n", "2", *args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def _fails(path, *args):
    done = CliRunner().invoke(app, ["bound", str(path), "-t", "h200x2", "-n", "2", *args])
    assert done.exit_code == 2 and "Traceback" not in done.output, done.output
    assert len(done.stderr.strip().splitlines()) == 1
    return done.stderr


def test_literal_defaults_of_every_type_are_read_from_the_source_without_running_it(typed):
    problem = from_source(read(typed))  # asserts if anything of the file would run
    assert problem is not None
    shape = problem.shapes["default"]
    assert shape == {
        "tokens": 64, "hidden": 128, "dtype": "float32", "eps": 1e-6, "scaled": True, "wdtype": "torch.bfloat16"
    }  # fmt: skip
    assert isinstance(shape["wdtype"], TorchDtype)


def test_a_file_at_its_defaults_is_bounded(typed):
    out = _bound(typed)
    assert [(c["kind"], c["size_bytes"]) for c in out["comm"]] == [("all-reduce", TOKENS * HIDDEN * 4)]  # fp32 x
    assert out["flops"] == 2 * TOKENS * HIDDEN * HIDDEN
    assert out["dtype"] == "fp32" and out["params"]["eps"] == 1e-6


def test_a_str_parameter_is_set_as_written(typed):
    out = _bound(typed, "-p", "dtype=bfloat16")
    assert out["comm"][0]["size_bytes"] == TOKENS * HIDDEN * 2 and out["dtype"] == "bf16"


def test_a_bool_parameter_reads_false(typed):
    assert _bound(typed, "-p", "scaled=false")["flops"] == 0
    assert _bound(typed, "-p", "scaled=0")["flops"] == 0


def test_a_float_parameter_reads_a_number(typed):
    assert _bound(typed, "-p", "eps=1e-3")["params"]["eps"] == 1e-3


def test_a_torch_dtype_parameter_reads_a_dtype_by_name(typed):
    # x [64, 128] fp32 and w [128, 128] read once, the output [64, 128] fp32 written once
    bf16 = _bound(typed)["hbm_bytes"]
    assert bf16 == TOKENS * HIDDEN * 4 * 2 + HIDDEN * HIDDEN * 2
    assert _bound(typed, "-p", "wdtype=float32")["hbm_bytes"] == TOKENS * HIDDEN * 4 * 2 + HIDDEN * HIDDEN * 4
    assert _bound(typed, "-p", "wdtype=torch.float32")["hbm_bytes"] == TOKENS * HIDDEN * 4 * 2 + HIDDEN * HIDDEN * 4


def test_a_parameter_named_dtype_answers_the_dtype_option_in_its_own_words(typed):
    out = _bound(typed, "--dtype", "bf16")  # the default "float32" is torch's word: bf16 is passed as "bfloat16"
    assert out["comm"][0]["size_bytes"] == TOKENS * HIDDEN * 2 and out["dtype"] == "bf16"
    assert load(str(typed)).with_dtype({}, "bf16") == {"dtype": "bfloat16"}


def test_a_dtype_parameter_written_as_a_torch_dtype_answers_the_dtype_option(tmp_path):
    path = tmp_path / "own.py"
    path.write_text(FILE.replace('dtype="float32"', "dtype=torch.float32").replace("getattr(torch, dtype)", "dtype"))
    assert load(str(path)).with_dtype({}, "fp16") == {"dtype": TorchDtype("torch.float16")}
    assert _bound(path, "--dtype", "fp16")["comm"][0]["size_bytes"] == TOKENS * HIDDEN * 2


def test_a_torch_dtype_default_set_by_code_is_read_when_the_file_runs(tmp_path):
    path = tmp_path / "by_code.py"
    path.write_text("import torch\nWDTYPE = torch.float16\n" + FILE.replace("wdtype=torch.bfloat16", "wdtype=WDTYPE"))
    assert from_source(read(path)) is None  # a default that is not a literal: the file must run to say it
    assert load(str(path)).shapes["default"]["wdtype"] == TorchDtype("torch.float16")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("-p", "scaled=maybe"), "--param scaled=maybe: must be true or false"),
        (("-p", "eps=small"), "--param eps=small: must be a finite number"),
        (("-p", "wdtype=floaty"), "torch.floaty is not a torch dtype"),
        (("-p", "tokens=6.5"), "--param tokens=6.5: must be a positive integer"),
        (("--dtype", "bf16", "-p", "dtype=float16"), "give the dtype once"),
    ],
)
def test_a_value_that_does_not_read_as_its_type_is_one_line(typed, args, said):
    assert said in _fails(typed, *args)
