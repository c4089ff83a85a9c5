"""The `dev` extra resolves on a fresh machine: quickly, without backtracking, and to the lock.

Each resolution runs pip's resolver with `--dry-run --report` for a new, empty venv with pip's
cache off (`PIP_NO_CACHE_DIR=1`), as a newcomer's machine would: a cache hides conflicts that
make pip walk back through every release of a package (boto3 against aiobotocore's botocore
band, s3fs against gcsfs's fsspec). Needs the package index, like the install itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "dev.lock"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{LOCK.name}: {line!r} is not an exact pin"
            pins[_canonical(name)] = version
    return pins


def _start(where: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    """pip's resolver for `.[dev]` into a new venv at `where`, started (not waited for)."""
    env_dir = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env_dir], check=True)
    report = where / "report.json"
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"),
            "install", "--dry-run", "--ignore-installed", "--report", str(report),
            *extra, f"{ROOT}[dev]",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    return proc, report


def _finish(proc: subprocess.Popen[str], report: Path) -> tuple[dict[str, str], str]:
    """{package: version} that pip would install, and pip's log."""
    log, _ = proc.communicate(timeout=280)
    assert proc.returncode == 0, f"pip could not resolve .[dev]:\n{log[-3000:]}"
    installs = json.loads(report.read_text())["install"]
    got = {
        _canonical(i["metadata"]["name"]): i["metadata"]["version"]
        for i in installs
        if _canonical(i["metadata"]["name"]) != "treetool"
    }
    return got, log


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, str], str]]:
    """Both resolutions, free and locked, run at once (each mostly waits on the index)."""
    free = _start(tmp_path_factory.mktemp("free"))
    locked = _start(tmp_path_factory.mktemp("locked"), "-c", str(LOCK))
    return {"free": _finish(*free), "locked": _finish(*locked)}


def test_dev_resolves_without_backtracking(resolved: dict) -> None:
    got, log = resolved["free"]
    # pip says this each time it walks back through a package's releases
    walked = sorted(set(re.findall(r"pip is looking at multiple versions of (\S+)", log)))
    assert not walked, f"pip backtracked through {walked}"
    # the pins that make the remote clients meet
    assert got["s3fs"] == got["fsspec"], (got["s3fs"], got["fsspec"])
    assert got["boto3"].rsplit(".", 1)[0] == got["botocore"].rsplit(".", 1)[0]
    assert got["torch"].split("+")[0] == "2.13.0"
    assert got["textual"].split(".")[0] == "8"


def test_the_lock_is_exactly_what_dev_installs(resolved: dict) -> None:
    pins = _lock()
    got, _ = resolved["locked"]
    got = {name: version.split("+")[0] for name, version in got.items()}
    # every package the locked install takes is pinned, at the pinned version ...
    unpinned = sorted(set(got) - set(pins))
    assert not unpinned, f"not in {LOCK.name}: {unpinned} (remake the lock: see its header)"
    differ = {n: (got[n], pins[n]) for n in got if got[n] != pins[n]}
    assert not differ, f"resolved vs locked: {differ}"
    # ... and the lock holds nothing that .[dev] no longer needs
    stale = sorted(set(pins) - set(got))
    assert not stale, f"{LOCK.name} pins packages .[dev] does not install: {stale}"
