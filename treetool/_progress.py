"""A progress line on the terminal while a big file is read (`treetool inspect FILE`).

The readers map files into memory (pickle) or read them (npz, safetensors…), and know
nothing of progress. What the process has taken in so far is visible from outside them, in
`/proc/self`: file bytes mapped in (`RssFile`) and bytes read (`rchar`). A thread samples
both ten times a second and redraws one line on stderr:

    reading ckpt.pkl  ━━━━━━━━━━━━╺━━━━━━━  27.4 MB of 47.0 MB · 1.3 s

Where `/proc` is missing the line shows the elapsed time only. Nothing is drawn unless
stderr is a terminal (and the file is at least `MIN_BYTES`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Any

__all__ = ["MIN_BYTES", "ReadProgress", "taken_in"]

#: files smaller than this are read without a progress line (the line also covers the
#: imports a first read pays for, a second or more: any file gets it)
MIN_BYTES = 0
#: seconds between redraws
INTERVAL = 0.1
_WIDTH = 20


def taken_in() -> int | None:
    """Bytes this process has taken in from files so far: max(mapped file pages, bytes
    read); None where /proc is not available.

    Example:
        >>> n = taken_in()
        >>> n is None or n > 0
        True
    """
    rss = rchar = None
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"RssFile:"):
                    rss = int(line.split()[1]) * 1024
                    break
        with open("/proc/self/io", "rb") as fh:
            for line in fh:
                if line.startswith(b"rchar:"):
                    rchar = int(line.split()[1])
                    break
    except (OSError, ValueError, IndexError):
        return None
    if rss is None and rchar is None:
        return None
    return max(rss or 0, rchar or 0)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _plain_name(path: str) -> str:
    """The file's base name through the sanitiser (a path is file-derived text: never let it
    move the cursor), shortened to 40 characters."""
    from treetool._text import safe

    out = safe(os.path.basename(path) or path)
    return out if len(out) <= 40 else out[:19] + "…" + out[-20:]


class ReadProgress:
    """A context manager that draws a progress line while the `with` body reads `path`.

    Args:
        path: the file being read (its size is the 100% mark), or what is being loaded
            (`module:attr`: the line then shows the elapsed time only).
        stream: where to draw; nothing is drawn unless it is a terminal.
        min_bytes: smaller files get no line.
        verb: the line's first word (`reading`, `importing`).

    Example:
        >>> import io
        >>> with ReadProgress(__file__, stream=io.StringIO()) as p:  # not a terminal
        ...     pass
        >>> p.drawn
        0
    """

    def __init__(
        self,
        path: str,
        *,
        stream: IO[str] | None = None,
        min_bytes: int = MIN_BYTES,
        verb: str = "reading",
    ):
        self.path = path
        self.verb = verb
        self.stream = stream if stream is not None else sys.stderr
        self.min_bytes = min_bytes
        #: how many times the line was drawn
        self.drawn = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._size = 0
        self._base: int | None = None
        self._t0 = 0.0

    def _wanted(self) -> bool:
        try:
            if not self.stream.isatty():
                return False
            self._size = os.path.getsize(self.path) if os.path.isfile(self.path) else 0
        except (OSError, ValueError, AttributeError):
            return False
        return self._size >= self.min_bytes

    def __enter__(self) -> ReadProgress:
        if self._wanted():
            self._t0 = time.perf_counter()
            self._base = taken_in()
            self._draw()  # at once: the first output comes before the first byte is read
            self._thread = threading.Thread(target=self._run, name="treetool-progress")
            self._thread.daemon = True
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        try:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            self._draw()

    def line(self) -> str:
        """The text of the progress line now."""
        elapsed = time.perf_counter() - self._t0
        name = _plain_name(self.path)
        if not self._size:
            return f"{self.verb} {name} · {elapsed:.1f} s"
        now = taken_in()
        if now is None or self._base is None:
            return f"{self.verb} {name} ({_mb(self._size)}) · {elapsed:.1f} s"
        done = min(max(now - self._base, 0), self._size)
        frac = min(done / self._size, 0.99)  # 100% is when the reader returns
        full = int(frac * _WIDTH)
        bar = "━" * full + ("╺" if full < _WIDTH else "") + "━" * max(_WIDTH - full - 1, 0)
        bar = f"\x1b[35m{bar[:full]}\x1b[2m{bar[full:]}\x1b[0m"
        return f"{self.verb} {name}  {bar}  {_mb(done)} of {_mb(self._size)} · {elapsed:.1f} s"

    def _draw(self) -> None:
        try:
            self.stream.write("\r\x1b[2K" + self.line())
            self.stream.flush()
            self.drawn += 1
        except (OSError, ValueError):
            self._stop.set()
