"""rooflines/ is pure math: importing it (and using it) must work with torch, pynvml and plotly unavailable."""

import subprocess
import sys

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'pynvml', 'plotly', 'pandas'):
            raise ImportError(f'blocked {name}')
sys.meta_path.insert(0, Block())
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True)


def test_rooflines_imports_and_computes_with_torch_blocked():
    r = _run(
        "import pkroof.rooflines as r\n"
        "from pkroof.rooflines.workloads import collective\n"
        "from pkroof.topology import preset\n"
        "b = r.bound(collective(r.Collective.ALL_REDUCE, 8, 'bf16', size=1 << 30), preset('hgx-h100-8').system())\n"
        "print(b.limiter)\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "link"


def test_the_blocker_really_blocks():
    r = _run("import torch\n")
    assert r.returncode != 0 and "blocked torch" in r.stderr
