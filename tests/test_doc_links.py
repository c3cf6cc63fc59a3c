"""Every relative link and every `benchmarks/...` path in README.md and docs/*.md names a file that exists.

Pure: reads markdown, touches nothing else. A path after a commit (`c670bfb:benchmarks/...`) names git history and
is skipped."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
BENCH = re.compile(r"(?<![\w/:.-])benchmarks/[\w./-]*[\w/]")


def _targets(page: Path) -> list[tuple[str, Path]]:
    text = page.read_text()
    found = []
    for link in LINK.findall(text):
        if re.match(r"[a-z]+:", link) or link.startswith("#"):
            continue
        found.append((link, page.parent / link.split("#")[0]))
    found += [(path, ROOT / path) for path in BENCH.findall(text)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_benchmarks_path_exists(page):
    missing = [name for name, path in _targets(page) if not path.exists()]
    assert not missing, f"{page.relative_to(ROOT)}: no such file: {missing}"
