"""Doctests of the TUI: `tui/` is installed as `treetool.tui` (a package-dir mapping), and
pytest would import `tui/reading.py` as `tui.reading` (which fails on its relative imports):
each module of `tui/` is imported as `treetool.tui.…` and found by pytest under its `tui.…`
name. Nothing is imported before a file of `tui/` is collected (jax and textual are not
imported by this file: tests/conftest.py sets jax up first)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

TUI = Path(__file__).parent / "tui"


def pytest_collect_file(file_path: Path, parent: Any) -> None:
    if file_path.suffix != ".py" or TUI not in file_path.parents:
        return
    parts = file_path.relative_to(TUI.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    for n in range(1, len(parts) + 1):
        name = ".".join(parts[:n])
        if name not in sys.modules:
            sys.modules[name] = importlib.import_module(f"treetool.{name}")
    return
