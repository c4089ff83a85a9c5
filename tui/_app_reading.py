"""The app's side of a file it reads itself: progress, snapshots, the swap to the whole tree.

`TreetoolApp` is a `ReadingApp`; its `_file_reader.FileReader` (the read worker and the
snapshot polling) posts the messages handled here (`ReadProgress`, `SnapshotReady`,
`ReadDone`, `ReadFailed`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App
from textual.widgets import TabbedContent, TabPane
from treetool.tui._file_reader import FileReader
from treetool.tui._gc import freeze
from treetool.tui.messages import ReadDone, ReadFailed, ReadKept, ReadProgress, SnapshotReady
from treetool.tui.tabs import TabSpec, tabs_for
from treetool.tui.widgets import DetailsPane, PytreeTree
from treetool.tui.widgets.totals import totals_text

from treetool._reading._read import Read
from treetool._reading._snapshots import Snapshot, resolve
from treetool._text import safe
from treetool._tree._model import Node

__all__ = ["ReadingApp"]


class ReadingApp(App[None]):
    """The part of the treetool app that shows a file while it is read (see `treetool._reading`)."""

    #: the file the app reads itself (None: the app was given the whole tree)
    reader: FileReader | None = None
    obj: Any
    model: Node
    node: Node
    note: str | None
    file_facts: dict[str, Any] | None
    extra_tabs: list[TabSpec]
    #: the totals bar's line (a var of `TreetoolApp`)
    totals_line: Text
    #: TreetoolApp's worker that indexes every leaf (the totals, search, the Leaves tab)
    _build_index: Callable[[], object]

    def _alive(self) -> bool:
        # Worker results and timers can land while the app is shutting down.
        return self.is_running and bool(self.screen.query(DetailsPane))

    def still_reading(self, what: str) -> bool:
        """True (and a toast saying so) while the file is read: `what` needs the whole tree."""
        reader = self.reader
        if reader is None or reader.done:
            return False
        self.notify(f"still reading the file: {what} once it is read", timeout=3, markup=False)
        return True

    # --- what the reader posts ---------------------------------------------------------------

    def on_read_progress(self, message: ReadProgress) -> None:
        if self.reader is not None and not self.reader.done:  # a line posted before the end
            self.show_progress(message.text)

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        reader = self.reader
        if reader is not None and reader.took(message.snapshot):
            self.show_snapshot(message.snapshot)
            self.show_progress(reader.text())

    def on_read_done(self, message: ReadDone) -> None:
        """The whole tree is read: the rows open now and the cursor are found in it (in a
        worker), then it replaces the tree shown."""
        if self.reader is None or not self._alive():
            return
        self._keep_rows(message.read, message.model, self.kept_paths())

    # (a description of its own: Textual would otherwise describe the worker by the repr of its
    # arguments, the whole tree read: 26 s for 20,000 small arrays)
    @work(
        thread=True,
        exclusive=True,
        group="read-kept",
        exit_on_error=False,
        description="the open rows, found in the whole tree",
    )
    def _keep_rows(self, read: Read, model: Node, kept: tuple[list[str], str | None]) -> None:
        opened, cursor = resolve(model, kept)
        self.post_message(ReadKept(read, model, opened, cursor))

    def on_read_kept(self, message: ReadKept) -> None:
        self.finish_reading(message.read, message.model, message.opened, message.cursor)

    def on_read_failed(self, message: ReadFailed) -> None:
        self.reading_failed(message.error)

    # --- the tree shown ----------------------------------------------------------------------

    def show_progress(self, text: Text) -> None:
        """The progress line of the read, in the totals line."""
        if self._alive():
            self.totals_line = text

    def kept_paths(self) -> tuple[list[str], str | None]:
        """The open rows and the cursor of the tree shown now (kept in the next one)."""
        return self.query_one(PytreeTree).kept_paths()

    def show_snapshot(self, snap: Snapshot) -> None:
        """Show the tree read so far (read-only: search, Leaves and totals wait)."""
        if self._alive():
            self._swap(snap.tree, snap.model, snap.opened, snap.cursor)

    def finish_reading(
        self,
        read: Read,
        model: Node,
        opened: dict[str, list[tuple[Node, int]]],
        cursor: list[tuple[Node, int]] | None,
    ) -> None:
        """The whole tree is read: it replaces the snapshot, and the totals are counted."""
        if self.reader is None or not self._alive():
            return
        self.reader.stop()
        self.file_facts = read.file_facts
        self.query_one(DetailsPane).file_facts = read.file_facts or {}
        self.totals_line = totals_text(None, None)
        self._swap(read.tree, model, opened, cursor)
        freeze()  # the whole tree lives as long as the app (see `_gc`)
        self._add_tabs(read.tree)
        if read.note:
            self.note = read.note
            self.sub_title = f"{self.sub_title} · ⚠ {read.note}"
            self.notify(read.note, severity="warning", timeout=8, markup=False)
        self._build_index()

    def reading_failed(self, error: BaseException) -> None:
        """The file could not be read: leave; `treetool.tui.run` raises `error`."""
        if self.reader is not None:
            self.reader.stop()
        self.exit()

    def _swap(
        self,
        obj: Any,
        model: Node,
        opened: dict[str, list[tuple[Node, int]]],
        cursor: list[tuple[Node, int]] | None,
    ) -> None:
        self.obj, self.model, self.node = obj, model, model
        pane = self.query_one(DetailsPane)
        pane.root, pane.totals = model, None
        self.query_one(PytreeTree).set_model(model, opened, cursor)
        pane.show(model)

    def _add_tabs(self, obj: Any) -> None:
        """The extra tabs (Jaxpr, Devices…) that apply to the whole tree, once it is read."""

        def failed(spec: TabSpec, e: Exception) -> None:
            text = safe(f"a tab failed and is left out: tab {spec.id}: {e}")
            self.notify(text, severity="error", timeout=8, markup=False)

        specs = tabs_for(obj, on_error=failed)
        tabs = self.query_one(TabbedContent)
        for spec in specs:
            tabs.add_pane(TabPane(spec.title, spec.make(obj), id=spec.id))
        self.extra_tabs = specs
