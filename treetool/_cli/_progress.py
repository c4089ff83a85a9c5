"""A progress line on stderr for remote reads that take longer than a second (CLI only).

The remote sources report the bytes they fetch to one hook (`treetool.io._sources._remote.set_progress`);
`remote_progress()` installs a reporter that shows a transient rich progress line on stderr
once reading has gone on for `TREETOOL_PROGRESS_AFTER` seconds (default 1), and removes it when
the command ends. stdout stays clean for pipes.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["remote_progress"]


class _Reporter:
    """Counts bytes from any thread; shows the progress line after `after` seconds."""

    def __init__(self, after: float) -> None:
        self.after = after
        self.total = 0
        self.started: float | None = None
        self.bar: Any = None
        self.task: Any = None
        self.timer: threading.Timer | None = None
        self.lock = threading.Lock()
        self.closed = False

    def __call__(self, n: int) -> None:
        with self.lock:
            self.total += n
            if self.started is None and not self.closed:
                self.started = time.monotonic()
                self.timer = threading.Timer(self.after, self._show)
                self.timer.daemon = True
                self.timer.start()
            if self.bar is not None:
                self.bar.update(self.task, completed=self.total)

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import DownloadColumn, Progress, SpinnerColumn, TransferSpeedColumn

        with self.lock:
            if self.closed:
                return
            self.bar = Progress(
                SpinnerColumn(),
                "reading remote bytes",
                DownloadColumn(),
                TransferSpeedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self.task = self.bar.add_task("read", total=None, completed=self.total)
            self.bar.start()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            if self.timer is not None:
                self.timer.cancel()
            if self.bar is not None:
                self.bar.stop()


@contextlib.contextmanager
def remote_progress(enabled: bool) -> Iterator[None]:
    """Show remote reads on stderr while the block runs (when `enabled` and on a terminal).

    Example:
        >>> with remote_progress(enabled=False):
        ...     pass
    """
    if not enabled or not sys.stderr.isatty():
        yield
        return
    try:
        after = max(0.0, float(os.environ.get("TREETOOL_PROGRESS_AFTER", "1")))
    except ValueError:
        after = 1.0
    from treetool.io._sources import _remote as _remote

    reporter = _Reporter(after)
    _remote.set_progress(reporter)
    try:
        yield
    finally:
        _remote.set_progress(None)
        reporter.close()
