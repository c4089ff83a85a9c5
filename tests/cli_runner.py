"""The one way the tests run `treetool` as a real subprocess (the hostile harness measures its
runs through its own launcher, `tests/hostile/harness.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

#: the console script installed beside this Python: what a user types
TREETOOL = str(Path(sys.executable).with_name("treetool"))

T = TypeVar("T")


def treetool(
    *args: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    columns: int | None = 100,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`treetool ARGS` in `cwd`: its `CompletedProcess` (text). The child gets this environment,
    `NO_COLOR=1`, `COLUMNS=columns` (unless None), then `env`."""
    full = {**os.environ, "NO_COLOR": "1"}
    if columns is not None:
        full["COLUMNS"] = str(columns)
    full.update(env or {})
    return subprocess.run(
        [TREETOOL, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
    )


def small_parent(cmd: list[str]) -> list[str]:
    """`cmd` started by a small shell that forks it: a child's peak RSS (`ru_maxrss`, which
    libFuzzer's `-rss_limit_mb` reads) starts at its parent's RSS at the fork, and this test
    process may hold gigabytes by the time a late test runs."""
    return ["/bin/sh", "-c", '"$@"; exit $?', "sh", *cmd]


def together(*calls: Callable[[], T]) -> list[T]:
    """Each call's result, in order, the calls run on as many threads as the machine has cores
    (2 to 4: each call is a subprocess holding its own jax): independent subprocesses, each
    mostly an interpreter starting and importing jax, then use every core while this test
    process waits. The first exception raised is raised here."""
    with ThreadPoolExecutor(max_workers=min(4, max(2, os.cpu_count() or 1))) as pool:
        return list(pool.map(lambda call: call(), calls))


class Ahead:
    """The `treetool` runs that a module's tests make, started together (`together`) when the
    module's first test asks, each still its own real subprocess; `ahead(*args)` is that run's
    `CompletedProcess`, or a fresh run where these args were not started ahead. The first
    args run alone, before the others: put first a run that builds what the others build.

    `runs` maps a test's name to the argument tuples it runs (all in `cwd`, no `env`): only the
    tests that this session selected are started. A test reads its results; the runs are pure
    (module:attr targets, committed files), so two tests may read the same one.

        AHEAD = Ahead(TESTS, {"test_ls": [("ls", "cli_targets:small")]})

        @pytest.fixture(scope="module", autouse=True)
        def _ahead(request):
            AHEAD.start(request)
    """

    def __init__(self, cwd: str | os.PathLike[str], runs: dict[str, list[tuple[str, ...]]]) -> None:
        self.cwd = cwd
        self.runs = runs
        self.done: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}

    def start(self, request: object) -> None:
        """Run, side by side, the args of this module's tests that the session selected."""
        import functools

        path = request.path  # type: ignore[attr-defined]
        items = request.session.items  # type: ignore[attr-defined]
        names = {getattr(it, "originalname", it.name) for it in items if it.path == path}
        wanted = list(
            dict.fromkeys(args for name in self.runs if name in names for args in self.runs[name])
        )
        # the first run alone: it fills the run's jax compilation cache (conftest.py) that the
        # others then read instead of each compiling the same programs at once
        results = [treetool(*wanted[0], cwd=self.cwd)] if wanted else []
        results += together(*(functools.partial(treetool, *a, cwd=self.cwd) for a in wanted[1:]))
        self.done = dict(zip(wanted, results))

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        if args in self.done:
            return self.done[args]
        return treetool(*args, cwd=self.cwd)
