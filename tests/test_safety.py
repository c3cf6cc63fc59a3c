"""NVLink multicast stays off: every Python file in the repository that starts GPU ranks switches it off first.

On shared hosts NVLS can take GPUs out of service, so any script that starts NCCL or symmetric memory must force
NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 before torch is imported:
pkroof's keep_multicast_off(), or all three variables by hand. This reads source files as text; it runs nothing.
"""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STARTS_RANKS = ("init_process_group", "mp.spawn", "_symmetric_memory")
KEYS = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


def _scripts() -> list[Path]:
    """Top-level scripts (run as `python FILE`) that start ranks themselves, outside the package and its tests."""
    try:
        listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
        files = [ROOT / line for line in listed.stdout.split()]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file under the root
        files = sorted(ROOT.rglob("*.py"))
    return [
        f
        for f in files
        if f.is_file() and "__main__" in (text := f.read_text()) and any(w in text for w in STARTS_RANKS)
    ]


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_script_that_starts_gpu_ranks_switches_multicast_off_before_torch(script):
    text = script.read_text()
    before_torch = text[: text.index("\nimport torch")] if "\nimport torch" in text else text
    assert "keep_multicast_off()" in before_torch or all(k in before_torch for k in KEYS), script.name


def test_the_tree_never_turns_multicast_on():
    # spelled in parts, so that this file is not itself a match
    on = ["cuMulticast" + "Create", "NCCL_NVLS_ENABLE" + "=1", "NVSHMEM_DISABLE_NVLS" + "=0"]
    on.append("TORCH_SYMM_MEM_DISABLE_MULTICAST" + "=0")
    for path in ROOT.rglob("*.py"):
        if ".venv" in path.parts:
            continue
        text = path.read_text(errors="replace")
        assert not any(word in text for word in on), path
