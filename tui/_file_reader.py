"""The app's side of a `reading.Reading`: the read worker, the snapshot requests, the progress.

Everything here reaches the app as a message (`messages.ReadProgress`, `SnapshotReady`,
`ReadDone`, `ReadFailed`), handled on its UI thread by `_app_reading.ReadingApp`.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.message import Message
from textual.worker import get_current_worker
from treetool.tui._gc import frozen_after
from treetool.tui.messages import ReadDone, ReadFailed, ReadProgress, SnapshotReady
from treetool.tui.reading import (
    PROGRESS_EVERY,
    SNAPSHOT_EVERY,
    SNAPSHOT_MAX,
    SPACING,
    LeafCounter,
    Reading,
    Snapshot,
    file_size,
    plain_name,
    prepare,
    progress_text,
)

from treetool._tree._model import view

if TYPE_CHECKING:
    from treetool.tui._app_reading import ReadingApp

__all__ = ["FileReader"]

#: seconds between two looks of the read worker at its read thread (and at its cancellation)
JOIN_EVERY = 0.05


class FileReader:
    """The read of a `Reading` for an app: `start()` once the app is mounted.

    The file is read by an exclusive thread worker (group "read"); snapshots are asked for
    and the progress line redrawn by a timer on the UI thread; snapshots are made ready
    (walked, counted) by a worker. The app asks `kept_paths()` of its tree for each snapshot.
    """

    def __init__(self, app: ReadingApp, reading: Reading) -> None:
        self.app = app
        self.reading = reading
        self.name = plain_name(reading.path)
        self.size = file_size(reading.path)
        self.watch: Any = None
        self.t0 = time.perf_counter()
        self.fraction: float | None = None
        self.leaves: int | None = None
        self.complete = True
        #: when the next snapshot may be asked for; a snapshot is asked for only when the
        #: last one was shown (one in flight at a time)
        self._next_ask = 0.0
        self._wait = SNAPSHOT_EVERY / 2
        self._asked = False
        self._preparing = False
        self._shown: Any = None
        #: the snapshot the next `_prepare` worker makes ready: (tree, fraction, kept paths)
        self._todo: tuple[Any, float, tuple[list[str], str | None]] | None = None
        self._base: int | None = None
        self._poller: Any = None
        self.counter = LeafCounter()
        self.done = False

    def start(self) -> None:
        """Start reading (a thread worker) and polling (a timer on the UI thread)."""
        from treetool._progress import taken_in

        self.watch = self.reading.watch
        self._base = taken_in()
        self.app.run_worker(
            self._read_worker,
            thread=True,
            exclusive=True,
            group="read",
            name="read",
            exit_on_error=False,
        )
        self._poller = self.app.set_interval(PROGRESS_EVERY, self.poll)
        self.poll()

    def stop(self) -> None:
        """No more polling (the read ended), and nothing here keeps a snapshot alive: the
        whole tree (or nothing, after an error) has taken their place."""
        self.done = True
        if self._poller is not None:
            self._poller.stop()
        self._shown = self._todo = None
        self.counter = LeafCounter()  # its counts hold the snapshots' containers
        if self.watch is not None:
            self.watch.release()

    def _read_worker(self) -> None:
        """Read the file in a daemon thread and wait for it while the worker runs.

        The read itself is a daemon thread: Textual's worker threads are joined when the
        app exits, so quitting in the middle of a 20 s read would wait for it; this worker,
        cancelled at exit, stops waiting at once and the read ends with the process.
        """
        worker = get_current_worker()
        thread = threading.Thread(target=self._read, name="treetool-read", daemon=True)
        thread.start()
        while thread.is_alive() and not worker.is_cancelled:
            thread.join(JOIN_EVERY)

    def _read(self) -> None:
        try:
            read = self.reading.read(self.watch)
            model = view(read.tree)
            with frozen_after():  # the whole tree lives as long as the app (see `_gc`)
                try:
                    model.is_leaf  # noqa: B018  (opens the root: a wide one is costly)
                except Exception:  # its row shows the error
                    pass
        except Exception as e:  # LoadError and the like: the app exits, `run` raises it
            self.reading.error = e
            self._post(ReadFailed(e))
            return
        self.reading.result = read
        self._post(ReadDone(read, model))

    def _post(self, message: Message) -> None:
        """Post `message` to the app from any thread, unless the app has already gone."""
        try:
            self.app.post_message(message)
        except RuntimeError:  # its event loop is closed: the app quit while the file was read
            pass

    def poll(self) -> None:
        """Ask for a snapshot when due, prepare the one that came, redraw the progress line."""
        if self.done:
            return
        now = time.perf_counter()
        watch = self.watch
        if watch is not None and not self._preparing:
            got = watch.latest()
            if got is not None and got[0] is not self._shown:
                tree, fraction = got
                self._shown = tree
                self._preparing = True
                self._asked = False
                # handed over in an attribute the worker empties: a closure over the tree
                # would keep this snapshot alive as long as the finished worker is referenced
                self._todo = (tree, fraction, self.app.kept_paths())
                self.app.run_worker(
                    self._prepare,
                    thread=True,
                    group="snapshot",
                    name="snapshot",
                    exit_on_error=False,
                )
            elif not self._asked and now >= self._next_ask:
                watch.request()
                self._asked = True
        if self.fraction is None or self.watch is None:
            self.fraction = self._bytes_fraction()
        self.app.post_message(ReadProgress(self.text()))

    def _bytes_fraction(self) -> float | None:
        from treetool._progress import taken_in

        now = taken_in()
        if not self.size or now is None or self._base is None:
            return None
        return min(max(now - self._base, 0) / self.size, 0.99)

    def _prepare(self) -> None:
        t0 = time.perf_counter()
        todo, self._todo = self._todo, None
        if todo is None:
            self._preparing = False
            return
        tree, fraction, kept = todo
        try:
            shown = getattr(self.watch, "as_finished", None)
            snap = prepare(tree, fraction, kept, self.counter, shown)
        finally:
            # a snapshot that took long to walk spaces out the next (the reader needs the GIL)
            took = time.perf_counter() - t0
            self._wait = min(self._wait * 2, SNAPSHOT_MAX)
            self._next_ask = time.perf_counter() + max(self._wait, SPACING * took)
            self._preparing = False
        if not self.done:
            self._post(SnapshotReady(snap))

    def took(self, snap: Snapshot) -> bool:
        """A snapshot reached the UI thread: its counts go in the progress line; False when
        the read has ended meanwhile (the snapshot is not shown)."""
        if self.done:
            return False
        self.fraction, self.leaves, self.complete = snap.fraction, snap.leaves, snap.complete
        return True

    def text(self) -> Text:
        """The progress line now."""
        return progress_text(
            self.name, self.fraction, self.leaves, self.complete, time.perf_counter() - self.t0
        )
