"""`treetool` in a subprocess that fails if numpy, ml_dtypes or jax were imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

# Runs `treetool` as the console script does (`treetool.cli.run`, which ends with os._exit);
# the exit fails with status 99, naming them, if numpy, ml_dtypes or jax were imported.
GUARD = """
import atexit, os, runpy, sys
_exit = os._exit
def _check(code=0):
    bad = [m for m in ("numpy", "ml_dtypes", "jax") if m in sys.modules]
    if bad:
        sys.stderr.write("imported: " + " ".join(bad) + "\\n")
        sys.stderr.flush()
        _exit(99)
    return code
os._exit = lambda code: _exit(_check(code))
atexit.register(_check)
sys.argv = ["treetool", *sys.argv[1:]]
runpy.run_module("treetool.cli", run_name="__main__")
"""


def run_guarded(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    """`treetool ARGS` in a subprocess that fails (99) if numpy/ml_dtypes/jax were imported."""
    return subprocess.run(
        [sys.executable, "-c", GUARD, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
