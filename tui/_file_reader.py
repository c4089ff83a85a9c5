"""The app's side of a file it reads itself: the core's `ProgressiveRead`, driven the Textual way.

The read and its snapshot schedule are the core's (`treetool._reading`, which the CLI drives
too); here an exclusive thread worker waits for the read thread, a timer on the UI thread
polls, and a worker makes each snapshot ready. Everything reaches the app as a message
(`messages.ReadProgress`, `SnapshotReady`, `ReadDone`, `ReadFailed`), handled on its UI
thread by `_app_reading.ReadingApp`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.message import Message
from textual.timer import Timer
from textual.worker import get_current_worker
from treetool.tui._gc import frozen_after
from treetool.tui.messages import ReadDone, ReadFailed, ReadProgress, SnapshotReady
from treetool.tui.widgets.totals import progress_text

from treetool._reading._progressive import ProgressiveRead
from treetool._reading._read import Read, Reading
from treetool._reading._snapshots import Snapshot
from treetool._tree._model import Node

if TYPE_CHECKING:
    from treetool.tui._app_reading import ReadingApp

__all__ = ["FileReader"]

#: seconds between redraws of the progress line (and polls for a snapshot)
PROGRESS_EVERY = 0.2
#: seconds between two looks of the read worker at its read thread (and at its cancellation)
JOIN_EVERY = 0.05


class FileReader:
    """The read of a `Reading` for an app: `start()` once the app is mounted.

    The file is read by the core's `ProgressiveRead` in a daemon thread, which an exclusive
    thread worker (group "read") waits for; snapshots are asked for and the progress line
    redrawn by a timer on the UI thread; snapshots are made ready (walked, counted) by a
    worker. The app asks `kept_paths()` of its tree for each snapshot.
    """

    def __init__(self, app: ReadingApp, reading: Reading) -> None:
        self.app = app
        self.reading = reading
        # the whole tree lives as long as the app: what opening it made is frozen (see `_gc`)
        self.read = ProgressiveRead(reading, settle=frozen_after)
        self._poller: Timer | None = None

    @property
    def done(self) -> bool:
        """The read has ended (the whole tree or an error has replaced the snapshots)."""
        return self.read.done

    def start(self) -> None:
        """Start reading (a thread worker) and polling (a timer on the UI thread)."""
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
        """No more polling, and no snapshot kept alive (see `ProgressiveRead.stop`)."""
        poller = self._poller
        if poller is not None:
            poller.stop()
        self.read.stop()

    def _read_worker(self) -> None:
        """Start the read thread (a daemon) and wait for it while the worker runs.

        Textual's worker threads are joined when the app exits, so quitting in the middle of
        a 20 s read would wait for it; this worker, cancelled at exit, stops waiting at once
        and the read ends with the process.
        """
        worker = get_current_worker()
        thread = self.read.start(self._done, self._failed)
        while thread.is_alive() and not worker.is_cancelled:
            thread.join(JOIN_EVERY)

    def _done(self, read: Read, model: Node) -> None:
        self._post(ReadDone(read, model))

    def _failed(self, error: BaseException) -> None:
        self._post(ReadFailed(error))

    def _post(self, message: Message) -> None:
        """Post `message` to the app from any thread, unless the app has already gone."""
        try:
            self.app.post_message(message)
        except RuntimeError:  # its event loop is closed: the app quit while the file was read
            pass

    def poll(self) -> None:
        """Ask for a snapshot when due, prepare the one that came, redraw the progress line."""
        if self.read.done:
            return
        if self.read.poll():
            # the open rows are read here, on the UI thread; the walk runs in a worker
            kept = self.app.kept_paths()
            self.app.run_worker(
                lambda: self._prepare(kept),
                thread=True,
                group="snapshot",
                name="snapshot",
                exit_on_error=False,
            )
        self.app.post_message(ReadProgress(self.text()))

    def _prepare(self, kept: tuple[list[str], str | None]) -> None:
        snap = self.read.prepare(kept)
        if snap is not None:
            self._post(SnapshotReady(snap))

    def took(self, snap: Snapshot) -> bool:
        """A snapshot reached the UI thread: its counts go in the progress line; False when
        the read has ended meanwhile (the snapshot is not shown)."""
        return self.read.took(snap)

    def text(self) -> Text:
        """The progress line now."""
        return progress_text(self.read.progress())
