"""docs/make_screenshots.py makes the TUI's SVG (Textual's save_screenshot) and the notebook
view's PNG (headless Chromium) from the real programs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_make_screenshots(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "make_screenshots.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    svg = tmp_path / "tui.svg"
    assert svg.is_file(), proc.stderr[-3000:]
    text = svg.read_text()
    assert text.startswith("<svg")
    # the app's real content: the demo's totals bar, its first block opened, the key bar
    for seen in ("173", "leaves", "TinyTransformer", "MultiheadAttention", "Quit"):
        assert seen in text, seen
    png = tmp_path / "notebook.png"
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        assert proc.returncode == 3
        assert "no chromium found" in proc.stderr
        assert not png.exists()
        pytest.skip("chromium is not installed: the notebook half was not run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1000, 420)
    assert len(data) > 20_000  # a rendered tree, not a blank page
