"""The `dev` extra resolves on a fresh machine: quickly, without backtracking, and to the lock.

Each resolution runs pip's resolver with `--dry-run --report` for a new, empty venv with pip's
cache off (`PIP_NO_CACHE_DIR=1`), as a newcomer's machine would: a cache hides conflicts that
make pip walk back through every release of a package (boto3 against aiobotocore's botocore
band, s3fs against gcsfs's fsspec). Needs the package index, like the install itself.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
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


def _start(where: Path, *extra: str) -> tuple[subprocess.Popen[str], Path, Path]:
    """pip's resolver for `.[dev]` into a new venv at `where`, started (not waited for); its log
    goes to a file (a pipe nobody reads until the test would fill up and stall pip)."""
    env_dir = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env_dir], check=True)
    report, log = where / "report.json", where / "pip.log"
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"),
                "install", "--dry-run", "--ignore-installed", "--report", str(report),
                *extra, f"{ROOT}[dev]",
            ],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, env=env,
            start_new_session=True,  # pip re-runs itself under the venv's python: end both
            # started early, it runs beside the suite: the tests get the cores first
            preexec_fn=functools.partial(os.nice, 10),
        )  # fmt: skip
    _STARTED.append(proc)
    return proc, report, log


def _finish(
    proc: subprocess.Popen[str], report: Path, log_file: Path
) -> tuple[dict[str, str], str]:
    """{package: version} that pip would install, and pip's log."""
    try:
        proc.wait(timeout=280)
    finally:
        _end(proc)
    log = log_file.read_text()
    assert proc.returncode == 0, f"pip could not resolve .[dev]:\n{log[-3000:]}"
    installs = json.loads(report.read_text())["install"]
    got = {
        _canonical(i["metadata"]["name"]): i["metadata"]["version"]
        for i in installs
        if _canonical(i["metadata"]["name"]) != "treetool"
    }
    return got, log


#: every pip started here: one still running when pytest exits (its tests deselected, or the
#: run stopped early) is ended then
_STARTED: list[subprocess.Popen[str]] = []
#: name -> the started resolution, when collection started them (see `pytest_generate_tests`)
_EARLY: dict[str, tuple[subprocess.Popen[str], Path, Path]] = {}


def _end(proc: subprocess.Popen[str]) -> None:
    """End `proc` and what it started (its own session), if it still runs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@atexit.register
def _end_leftovers() -> None:
    for proc in _STARTED:
        _end(proc)


def _both(where: Callable[[str], Path]) -> dict[str, tuple[subprocess.Popen[str], Path, Path]]:
    return {"free": _start(where("free")), "locked": _start(where("locked"), "-c", str(LOCK))}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """In a whole, unfiltered run (CI's `python -m pytest`), start both resolutions as soon as
    this module is collected: they mostly wait on the package index for about two minutes, and
    now wait while the rest of the suite runs instead of on their own. A filtered run (`-m`,
    `-k`, `--collect-only`, an xdist worker) starts them only if and when the tests run."""
    opt = metafunc.config.option
    filtered = opt.markexpr or opt.keyword or opt.collectonly
    if _EARLY or filtered or hasattr(metafunc.config, "workerinput"):
        return
    base = Path(tempfile.mkdtemp(prefix="treetool-resolve-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    _EARLY.update(_both(lambda name: base / name))


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, str], str]]:
    """Both resolutions, free and locked, run at once (each mostly waits on the index)."""
    started = dict(_EARLY) or _both(tmp_path_factory.mktemp)
    return {name: _finish(*run) for name, run in started.items()}


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
