"""The Diff tab: `treetool.diff(obj, other)` computed in a worker, then every change listed.

The list is virtual (one line per change, drawn only when on screen), so a diff of 100,000
changes scrolls like one of ten; enter on a change shows its path in the Tree tab.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static
from textual.worker import Worker, get_current_worker
from treetool.tui._workers import report_failure
from treetool.tui.messages import ItemFocused, LeafChosen, TabItem

from treetool._text import safe, safe_text

__all__ = ["ChangeList", "DiffTab"]

_SIGN_STYLE = {"+": Style(color="green"), "-": Style(color="red"), "~": Style(color="yellow")}


class ChangeList(ScrollView, can_focus=True):
    """One line per change (`~ ['w']  shape  (3,) → (4,)`), drawn on demand."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False, tooltip="Previous change"),
        Binding("down,j", "cursor(1)", "Down", show=False, tooltip="Next change"),
        Binding("pageup", "page(-1)", "Page up", show=False, tooltip="One page up"),
        Binding("pagedown", "page(1)", "Page down", show=False, tooltip="One page down"),
        Binding("home", "edge(0)", "First", show=False, tooltip="First change"),
        Binding("end", "edge(1)", "Last", show=False, tooltip="Last change"),
        Binding("enter", "choose", "Show in tree", tooltip="Show the changed path in the tree"),
    ]

    DEFAULT_CSS = """
    ChangeList { height: 1fr; }
    ChangeList > .change-list--cursor { background: $accent 40%; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"change-list--cursor"}

    cursor: reactive[int] = reactive(0, always_update=True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.changes: list[Any] = []
        self._lines: dict[int, Text] = {}

    def set_changes(self, changes: list[Any]) -> None:
        """Show these `Change`s."""
        self.changes = changes
        self._lines.clear()
        self.virtual_size = Size(self.size.width, len(changes))
        self.cursor = 0
        self.refresh()

    def line_text(self, i: int) -> Text:
        """The text of change `i` (cached; built when first drawn)."""
        t = self._lines.get(i)
        if t is None:
            c = self.changes[i]
            t = Text(no_wrap=True)
            t.append(f"{c.sign} ", _SIGN_STYLE.get(c.sign, Style()))
            t.append(c.path or "(root)", style="bold")
            t.append(f"  {c.kind}  ", style="dim")
            try:
                t.append(c.summary)
            except Exception as e:  # one odd value must not break the list
                t.append(f"({type(e).__name__}: {e})", style="red")
            if len(self._lines) > 4096:
                self._lines.clear()
            self._lines[i] = t
        return t

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width or self.size.width
        row = int(self.scroll_offset.y) + y
        base = self.rich_style
        if row >= len(self.changes):
            return Strip.blank(width, base)
        segs = list(self.line_text(row).render(self.app.console))
        strip = Strip(segs).crop(int(self.scroll_offset.x), int(self.scroll_offset.x) + width)
        if row == self.cursor:
            strip = strip.apply_style(self.get_component_rich_style("change-list--cursor"))
        return strip.adjust_cell_length(width, base)

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, len(self.changes))

    def item(self, i: int) -> TabItem:
        """Change `i` for the details pane: kind, the detail line, before and after; `y`
        copies its path as an expression, `Y` in keystr form."""
        from treetool._tree._chain import expression

        c = self.changes[i]
        try:
            summary = c.summary
        except Exception as e:  # one odd value must not break the pane
            summary = f"({type(e).__name__}: {e})"
        rows: list[tuple[str, Any]] = [
            ("change", f"{c.sign} {c.kind}"),
            ("what", summary),
            ("before", _value_text(c.before)),
            ("after", _value_text(c.after)),
        ]
        for k, v in (c.detail or {}).items():
            rows.append((str(k), _value_text(v)))
        root = getattr(self.app, "root_name", "tree")
        return TabItem(c.path or "(root)", rows, expression(root, safe(c.path)), safe(c.path))

    def watch_cursor(self, new: int) -> None:
        if 0 <= new < len(self.changes):
            self.post_message(ItemFocused.of(self, self.item(new)))
        page = max(1, self.scrollable_content_region.height)
        top = int(self.scroll_offset.y)
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + page:
            self.scroll_to(y=new - page + 1, animate=False, immediate=True)
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        """Move the cursor by `delta` changes."""
        self.cursor = max(0, min(len(self.changes) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        """One page up or down."""
        self.action_cursor(direction * max(1, self.scrollable_content_region.height - 1))

    def action_edge(self, end: int) -> None:
        """The first (0) or last (1) change."""
        self.cursor = max(0, len(self.changes) - 1) if end else 0

    def action_choose(self) -> None:
        """Show the changed path in the Tree tab (a removed path is not in the tree)."""
        if 0 <= self.cursor < len(self.changes):
            c = self.changes[self.cursor]
            if c.kind != "removed":
                self.post_message(LeafChosen(c.path))

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y) + event.y
        if 0 <= row < len(self.changes):
            if row == self.cursor and event.chain > 1:
                self.action_choose()
            self.cursor = row


def _value_text(v: Any, limit: int = 300) -> str:
    try:
        text = v if isinstance(v, str) else repr(v)
    except Exception as e:
        text = f"<repr failed: {type(e).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


class DiffTab(Vertical):
    """Every change between the app's tree (before) and `other` (after)."""

    DEFAULT_CSS = """
    DiffTab { padding: 0 1; }
    DiffTab > #diff-body { height: auto; }
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
        yield ChangeList(id="diff-changes")

    class Computed(Message, bubble=False):
        """The diff worker's answer: the diff (None when it failed) and the body to show."""

        def __init__(self, result: Any, body: Any) -> None:
            super().__init__()
            self.result = result
            self.body = body

    def on_mount(self) -> None:
        self._compute()

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def _compute(self) -> None:
        from treetool._diff._rich import _header
        from treetool._diff._tree_diff import diff

        try:
            d = diff(self.before, self.after)
        except Exception as e:  # shown in the tab, the rest of the app keeps working
            body: Any = safe_text(f"diff failed: {type(e).__name__}: {e}", "bold red")
            d = None
        else:
            body = _header(d) if d else Text("the two trees are equal", style="bold green")
        if not get_current_worker().is_cancelled:
            self.post_message(self.Computed(d, body))

    def on_diff_tab_computed(self, message: Computed) -> None:
        d, body = message.result, message.body
        self.result = d
        self.query_one("#diff-body", Static).update(body)  # plain: a TreeDiff or a Text
        self.query_one(ChangeList).set_changes(list(d.changes) if d else [])
