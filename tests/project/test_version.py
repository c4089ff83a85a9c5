"""The version is written once, in pyproject.toml: the package, `treetool --version` and the
distribution's metadata agree, and the changelog has released it or lists it as the next one."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import treetool

ROOT = Path(__file__).parents[2]


def test_package_version_is_the_distributions():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert treetool.__version__ == importlib.metadata.version("treetool") == declared
    # the changelog's newest release heading is the declared version
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert released[0] == declared


@pytest.mark.slow
def test_cli_version_reads_the_metadata_only_when_asked():
    code = (
        "import sys; from treetool.cli import main\n"
        "try: main(['--version'])\n"
        "except SystemExit: pass\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout == f"treetool {importlib.metadata.version('treetool')}\n"
    # --help does not pay for importlib.metadata
    code = (
        "import sys; from treetool.cli import main\n"
        "try: main(['--help'])\n"
        "except SystemExit: pass\n"
        "print('importlib.metadata' in sys.modules, file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stderr.strip() == "False"
