"""A class defined in the problem file (a namedtuple) sent with broadcast_object_list (issue 32 item 5b): the file is
importable by its module name in every rank process, as under torchrun, so the object pickles there and unpickles
on the other ranks; on meta tensors the object's bytes are not there, so the trace runs on CPU ranks."""

import pickle
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pkroof.analysis.catalogue import load  # noqa: E402
from pkroof.analysis.source import read, run  # noqa: E402
from pkroof.analysis.trace import trace  # noqa: E402
from pkroof.rooflines import Collective  # noqa: E402

FILE = Path(__file__).parent / "data" / "issue32" / "object_list_namedtuple.py"


def test_a_namedtuple_of_the_problem_file_is_broadcast_as_an_object():
    module = run(read(FILE))  # the class as the ranks pickle it: by the module name the file is imported under
    pickled = len(pickle.dumps(module.Meta(4, 64)))
    p = load(str(FILE))
    w = trace(p, 2, p.params())
    for view in w.views():
        # broadcast_object_list: each object's size (one int64), then the pickled bytes; then the 256-fp32 all-reduce
        sizes = [(op.kind, op.size_bytes) for op in view.comm]
        assert sizes == [
            (Collective.BROADCAST, 8),
            (Collective.BROADCAST, pickled),
            (Collective.ALL_REDUCE, 256 * 4),
        ]
