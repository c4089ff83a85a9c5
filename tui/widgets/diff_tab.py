"""The Diff tab: `treetool.diff(obj, other)` computed in a worker, then shown as rich text."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static
from textual.worker import Worker, get_current_worker

from .._workers import report_failure

__all__ = ["DiffTab"]


class DiffTab(VerticalScroll):
    """Every change between the app's tree (before) and `other` (after)."""

    DEFAULT_CSS = """
    DiffTab { padding: 0 1; }
    """

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)

    def show_failure(self, text: str) -> None:
        """Show a failed worker's one-line error in this tab."""
        self.query_one("#diff-body", Static).update(Text(text, style="bold red"))

    def __init__(self, before: Any, after: Any, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.before = before
        self.after = after
        self.result: Any = None

    def compose(self) -> ComposeResult:
        yield Static(Text("comparing the two trees…", style="dim italic"), id="diff-body")

    def on_mount(self) -> None:
        self._compute()

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def _compute(self) -> None:
        from ..._diff import diff

        try:
            d = diff(self.before, self.after)
        except Exception as e:  # shown in the tab, the rest of the app keeps working
            body: Any = Text(f"diff failed: {type(e).__name__}: {e}", style="bold red")
            d = None
        else:
            body = d if d else Text("the two trees are equal", style="bold green")
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show, d, body)

    def _show(self, d: Any, body: Any) -> None:
        self.result = d
        self.query_one("#diff-body", Static).update(body)
