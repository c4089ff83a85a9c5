"""The documentation site builds with `mkdocs build --strict`, and its nav holds every page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import treetool

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:") :]
    return re.findall(r":\s*([\w/.-]+\.md)\s*$", nav, flags=re.M)


def test_every_page_is_in_the_nav() -> None:
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(_nav_pages()) == pages


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    for page in _nav_pages():
        built = site / (
            "index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html"
        )
        assert built.is_file(), page
    api = (site / "api" / "index.html").read_text()
    for name in treetool.__all__:  # every public name has its entry, from its docstring,
        # under its public path (`treetool.sharding.placement` for `tt.placement`)
        home = getattr(getattr(treetool, name), "__module__", "treetool")
        assert f'id="treetool.{name}"' in api or f'id="{home}.{name}"' in api, name
    # docstring examples render as code, not as Markdown (where `['w']` would be a link)
    assert "&gt;&gt;&gt;" in api
    assert (site / "images" / "tui.svg").is_file()
    assert (site / "images" / "notebook.png").is_file()
