"""Doctests of the TUI: `tui/` is installed as `treetool.tui` (a package-dir mapping), and
pytest would import `tui/reading.py` as `tui.reading` (which fails on its relative imports):
each module of `tui/` is imported as `treetool.tui.…` and found by pytest under its `tui.…`
name. Nothing is imported before a file of `tui/` is collected (jax and textual are not
imported by this file: tests/conftest.py sets jax up first)."""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

# One jax compilation cache for this run, on disk, shared by the test process and every process
# it starts (inherited through the environment; jax is not imported yet): each `treetool`, page
# or example subprocess that builds a model (`jax.random` in equinox's initialisers) compiles
# the same XLA programs, about 0.15 s each, and would pay them all again in every process. A
# fresh folder per run, removed at exit: nothing from another run or version is reused.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _JAX_CACHE = tempfile.mkdtemp(prefix="treetool-tests-jax-cache-")
    atexit.register(shutil.rmtree, _JAX_CACHE, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _JAX_CACHE
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

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
