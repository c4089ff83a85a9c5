"""A file read in a thread, with snapshots of the tree so far on a schedule (`ProgressiveRead`).

The read runs in a daemon thread (quitting in the middle of a 20 s read does not wait for
it). A front end calls `poll()` a few times a second: it asks the reader's watch for a
snapshot at once, then after `SNAPSHOT_EVERY` seconds, then twice as long each time (up to
`SNAPSHOT_MAX`), never sooner than `SPACING` times the last snapshot's preparing time (that
work holds the GIL the reader needs). A snapshot that came is made ready by `prepare()` (a
worker's job) and its counts go in the progress (`took()`). Nothing here knows the TUI: the
app drives it from a timer and workers; without a front end, `follow()` drives it from a loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from treetool._reading._read import Read, Reading, file_size, plain_name
from treetool._reading._snapshots import LeafCounter, Snapshot, prepare
from treetool._tree._model import Node, no_gc, view

__all__ = ["SNAPSHOT_EVERY", "SNAPSHOT_MAX", "SPACING", "Progress", "ProgressiveRead"]

#: seconds between snapshot requests (at least: a snapshot that took long spaces them out)
SNAPSHOT_EVERY = 0.3
#: the longest wait between two snapshots (each snapshot of a wide node costs the reader
#: time: the first shows the top levels, later ones come less and less often)
SNAPSHOT_MAX = 4.0
#: the next snapshot is asked for this many times the last one's preparing time later at
#: the earliest (preparing holds the GIL the reader needs: at most ~1/11 of the read's time)
SPACING = 10


@dataclass(frozen=True)
class Progress:
    """Where a read is: the file's plain name, the share read (None: not known), the leaves
    of the last snapshot (None: none yet; `complete` False: counting stopped at that many),
    the seconds since the read started.

    Example:
        >>> Progress("ckpt.pkl", 0.43, 431_000, True, 2.5).leaves_text()
        '431,000 of ~1,002,326 leaves so far'
        >>> Progress("ckpt.pkl", 0.5, 10, False, 1.0).leaves_text()
        'over 10 leaves so far'
        >>> Progress("ckpt.pkl", None, None, True, 0.1).leaves_text()
        ''
    """

    name: str
    fraction: float | None
    leaves: int | None
    complete: bool
    seconds: float

    def leaves_text(self) -> str:
        """The leaves read so far, as the progress line says them ('' before the first)."""
        leaves, fraction = self.leaves, self.fraction
        if leaves is None:
            return ""
        if not self.complete:
            return f"over {leaves:,} leaves so far"
        if fraction and fraction >= 0.01:
            return f"{leaves:,} of ~{round(leaves / fraction):,} leaves so far"
        return f"{leaves:,} leaves so far"


class ProgressiveRead:
    """The read of a `Reading` in a daemon thread, with its snapshots and its progress.

    Args:
        reading: the file and how to read it; its `watch` (a `PartialWatch`, or None: the
            progress only) is asked for snapshots.
        settle: wraps the opening of the whole tree's root in the read thread (default: the
            collector paused; the TUI also freezes what it made, see `tui/_gc.py`).

    `start(on_done, on_failed)` starts the read: `on_done(read, model)` (the whole tree and
    its Node view, root opened) or `on_failed(error)` is called in the read thread; the
    outcome is also kept in `reading.result` / `reading.error`.

    Example:
        >>> import threading
        >>> ended = threading.Event()
        >>> r = ProgressiveRead(Reading("ckpt.pkl", lambda watch: Read({"w": [1.0, 2.0]})))
        >>> thread = r.start(lambda read, model: ended.set(), lambda e: ended.set())
        >>> ended.wait(10), r.reading.result.tree, r.progress().name
        (True, {'w': [1.0, 2.0]}, 'ckpt.pkl')
    """

    def __init__(
        self,
        reading: Reading,
        settle: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        self.reading = reading
        self.watch: Any = reading.watch
        self.settle = settle or no_gc
        self.name = plain_name(reading.path)
        self.size = file_size(reading.path)
        self.t0 = time.perf_counter()
        self.fraction: float | None = None
        self.leaves: int | None = None
        self.complete = True
        #: the read ended (the whole tree, or an error, has taken the snapshots' place)
        self.done = False
        self.counter = LeafCounter()
        self.thread: threading.Thread | None = None
        #: when the next snapshot may be asked for; a snapshot is asked for only when the
        #: last one was taken (one in flight at a time)
        self._next_ask = 0.0
        self._wait = SNAPSHOT_EVERY / 2
        self._asked = False
        self._preparing = False
        self._shown: Any = None
        #: the snapshot the next `prepare` makes ready: (tree, fraction); held in an
        #: attribute `prepare` empties (a closure would keep it alive with its worker)
        self._todo: tuple[Any, float] | None = None
        self._base: int | None = None

    def start(
        self,
        on_done: Callable[[Read, Node], None],
        on_failed: Callable[[BaseException], None],
    ) -> threading.Thread:
        """Start the read thread (a daemon) and return it."""
        from treetool._progress import taken_in

        self._base = taken_in()
        thread = threading.Thread(
            target=self._read, args=(on_done, on_failed), name="treetool-read", daemon=True
        )
        self.thread = thread
        thread.start()
        return thread

    def _read(
        self, on_done: Callable[[Read, Node], None], on_failed: Callable[[BaseException], None]
    ) -> None:
        try:
            read = self.reading.read(self.watch)
            model = view(read.tree)
            with self.settle():
                try:
                    model.is_leaf  # noqa: B018  (opens the root: a wide one is costly)
                except Exception:  # its row shows the error
                    pass
        except Exception as e:  # LoadError and the like: the front end says it, one line
            self.reading.error = e
            on_failed(e)
            return
        self.reading.result = read
        on_done(read, model)

    def poll(self) -> bool:
        """Ask for a snapshot when due; True when one came and is to be made ready (call
        `prepare` then, in a worker). Also updates the share read when no snapshot tells it."""
        if self.done:
            return False
        watch, due = self.watch, False
        if watch is not None and not self._preparing:
            got = watch.latest()
            if got is not None and got[0] is not self._shown:
                self._shown = got[0]
                self._todo = got
                self._preparing = True
                self._asked = False
                due = True
            elif not self._asked and time.perf_counter() >= self._next_ask:
                watch.request()
                self._asked = True
        if self.fraction is None or watch is None:
            self.fraction = self._bytes_fraction()
        return due

    def _bytes_fraction(self) -> float | None:
        from treetool._progress import taken_in

        now = taken_in()
        if not self.size or now is None or self._base is None:
            return None
        return min(max(now - self._base, 0) / self.size, 0.99)

    def prepare(self, kept: tuple[list[str], str | None] = ([], None)) -> Snapshot | None:
        """Make the snapshot `poll` found ready (see `snapshots.prepare`), with the open rows
        and the cursor `kept` found in it; None when there is none or the read has ended."""
        t0 = time.perf_counter()
        todo, self._todo = self._todo, None
        if todo is None:
            self._preparing = False
            return None
        tree, fraction = todo
        try:
            shown = getattr(self.watch, "as_finished", None)
            snap = prepare(tree, fraction, kept, self.counter, shown)
        finally:
            # a snapshot that took long to walk spaces out the next (the reader needs the GIL)
            took = time.perf_counter() - t0
            self._wait = min(self._wait * 2, SNAPSHOT_MAX)
            self._next_ask = time.perf_counter() + max(self._wait, SPACING * took)
            self._preparing = False
        return None if self.done else snap

    def took(self, snap: Snapshot) -> bool:
        """A snapshot is shown: its counts go in the progress; False when the read has ended
        meanwhile (the snapshot is not to be shown)."""
        if self.done:
            return False
        self.fraction, self.leaves, self.complete = snap.fraction, snap.leaves, snap.complete
        return True

    def stop(self) -> None:
        """The read ended: nothing here keeps a snapshot alive any more (the whole tree, or
        nothing after an error, has taken their place)."""
        self.done = True
        self._shown = self._todo = None
        self.counter = LeafCounter()  # its counts hold the snapshots' containers
        if self.watch is not None:
            self.watch.release()

    def progress(self) -> Progress:
        """Where the read is now."""
        return Progress(
            self.name, self.fraction, self.leaves, self.complete, time.perf_counter() - self.t0
        )

    def follow(self, every: float = 0.1) -> Iterator[Progress]:
        """Drive the read from this thread until it ends: poll, make each snapshot ready
        here, and yield the progress every `every` seconds (a CLI's progress line).
        `start` first; the loop ends when the read thread has."""
        thread = self.thread
        while thread is not None and thread.is_alive():
            if self.poll():
                snap = self.prepare()
                if snap is not None:
                    self.took(snap)
            yield self.progress()
            thread.join(every)
        self.stop()
