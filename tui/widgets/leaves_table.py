"""A virtual table of every leaf: only the rows on screen are ever rendered.

Textual's DataTable stores every row as widgets' data and takes seconds to add 1e6 rows; this
table is a `ScrollView` whose `render_line` reads straight from a `LeafIndex`, so scrolling
and sorting cost the same at 1e3 and 1e6 leaves.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events, work
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive, var
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.worker import Worker, get_current_worker
from treetool.tui._workers import report_failure
from treetool.tui.messages import LeafChosen

from treetool._text import safe
from treetool._tree._leaf_index import COLUMNS, LeafIndex

__all__ = ["LeavesTable"]

#: widest cell of each column but the path (which takes the rest); narrower when the data is
_MAX_WIDTHS = {"type": 20, "dtype": 10, "params": 8, "nbytes": 9, "device": 12}
#: columns dropped, in this order, while the path column would be narrower than _MIN_PATH
_DROP_ORDER = ("device", "dtype", "nbytes", "type")
_MIN_PATH = 24
_RIGHT = frozenset({"params", "nbytes"})


def _head_cells(text: str, cells: int) -> str:
    """The longest start of `text` that fits in `cells` terminal cells."""
    out, used = [], 0
    for ch in text:
        w = cell_len(ch)
        if used + w > cells:
            break
        out.append(ch)
        used += w
    return "".join(out)


def _tail_cells(text: str, cells: int) -> str:
    """The longest end of `text` that fits in `cells` terminal cells."""
    return _head_cells(text[::-1], cells)[::-1]


class LeavesTable(ScrollView, can_focus=True):
    """Every leaf as a row (path, type, dtype, params, bytes, device); sortable, filterable."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False, tooltip="Previous leaf", id="leaves.up"),
        Binding("down,j", "cursor(1)", "Down", show=False, tooltip="Next leaf", id="leaves.down"),
        Binding(
            "pageup", "page(-1)", "Page up", show=False, tooltip="One page up", id="leaves.pageup"
        ),
        Binding(
            "pagedown",
            "page(1)",
            "Page down",
            show=False,
            tooltip="One page down",
            id="leaves.pagedown",
        ),
        Binding("home", "edge(0)", "First", show=False, tooltip="First leaf", id="leaves.home"),
        Binding("end", "edge(1)", "Last", show=False, tooltip="Last leaf", id="leaves.end"),
        Binding("s", "sort_next", "Sort", tooltip="Sort by the next column", id="leaves.sort"),
        Binding("B", "sort_key('nbytes')", "By bytes", tooltip="Sort by bytes, largest first"),
        Binding("P", "sort_key('params')", "By params", tooltip="Sort by params, largest first"),
        Binding("A", "sort_key('path')", "By path", show=False, tooltip="Sort by path (A-Z)"),
        Binding("T", "sort_key('type')", "By type", show=False, tooltip="Sort by type"),
        Binding("D", "sort_key('dtype')", "By dtype", show=False, tooltip="Sort by dtype"),
        Binding("V", "sort_key('device')", "By device", show=False, tooltip="Sort by device"),
        Binding("r", "reverse", "Reverse", tooltip="Reverse the sort order", id="leaves.reverse"),
        Binding(
            "enter",
            "choose",
            "Show in tree",
            tooltip="Show this leaf in the Tree tab",
            id="leaves.choose",
        ),
    ]
    """
    | Key(s) | Description |
    | :- | :- |
    | up/down, j/k | Move the cursor. |
    | pageup/pagedown, home/end | Move by a page, to the first/last leaf. |
    | s | Sort by the next column (path, type, dtype, params, bytes, device). |
    | B, P | Sort by bytes, by params: largest first (again: smallest first). |
    | A, T, D, V | Sort by path, type, dtype, device (again: reversed). |
    | r | Reverse the sort order. |
    | enter | Show the leaf in the Tree tab. |
    | click on a header | Sort by that column (again: reverse). |
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "leaves-table--header",
        "leaves-table--cursor",
        "leaves-table--odd",
    }

    DEFAULT_CSS = """
    LeavesTable { background: $surface; scrollbar-gutter: stable; }
    LeavesTable > .leaves-table--header { background: $panel; text-style: bold; color: $text-accent; }
    LeavesTable > .leaves-table--cursor { background: $block-cursor-blurred-background; }
    LeavesTable:focus > .leaves-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    LeavesTable > .leaves-table--odd { background: $surface-lighten-1; }
    """

    #: the leaf index shown (None: not built yet); the app binds it to its own `index`
    index: var[LeafIndex | None] = var(None, init=False)
    cursor = reactive(0, always_update=True)
    sort_column: reactive[str | None] = reactive(None)
    sort_reverse = reactive(False)
    #: the order of the rows on screen, (column, reverse): the header's arrow is drawn from it,
    #: so it changes with the rows (the sort runs in a worker), never before them
    shown_order: var[tuple[str | None, bool]] = var((None, False))

    class Sorted(Message, bubble=False):
        """The sort worker's rows; newer rows replace rows not shown yet."""

        def __init__(
            self, rows: np.ndarray, column: str | None = None, reverse: bool = False
        ) -> None:
            super().__init__()
            self.rows = rows
            #: the order the rows are in: the header shows it with them, never before
            self.column = column
            self.reverse = reverse

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LeavesTable.Sorted)

    class Highlighted(Message):
        """The cursor moved onto a leaf; handled by `on_leaves_table_highlighted`."""

        def __init__(self, path: str) -> None:
            super().__init__()
            self.path = path

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: np.ndarray = np.zeros(0, dtype=np.int64)
        self.filter_rows: np.ndarray | None = None
        self._widths_cache: dict[str, int] = dict(_MAX_WIDTHS)

    # --- data --------------------------------------------------------------------------

    def watch_index(self, index: LeafIndex | None) -> None:
        """Show the leaves of `index` (in leaf order until sorted)."""
        if index is None:
            return
        self._widths_cache = self._natural_widths()
        self._apply_order()

    def set_filter_rows(self, rows: np.ndarray | None) -> None:
        """Show only these rows of the index (None: every leaf); computed by the search worker."""
        if self.index is None:
            return
        self.filter_rows = rows
        self._apply_order()

    def row_for(self, path: str) -> int | None:
        """The row showing leaf `path` (after filter and sort), or None."""
        if self.index is None:
            return None
        found = self.index.row_of(path)
        if found is None:
            return None
        at = np.flatnonzero(self.rows == found)
        return int(at[0]) if len(at) else None

    def node_path(self) -> str | None:
        """The path of the leaf under the cursor."""
        return self.path_at(self.cursor)

    def _apply_order(self) -> None:
        if self.index is None:
            return
        if self.sort_column is None:
            rows = (
                np.arange(len(self.index), dtype=np.int64)
                if self.filter_rows is None
                else self.filter_rows
            )
            self._set_rows(rows, (None, False))
        else:
            self._sort(self.sort_column, self.sort_reverse)

    @work(thread=True, exclusive=True, group="sort", exit_on_error=False)
    def _sort(self, column: str, reverse: bool) -> None:
        index = self.index
        if index is None:
            return
        rows = index.order(column, reverse, self.filter_rows)
        if not get_current_worker().is_cancelled:
            self.post_message(self.Sorted(rows, column, reverse))

    def on_leaves_table_sorted(self, message: Sorted) -> None:
        self._set_rows(message.rows, (message.column, message.reverse))

    def _set_rows(self, rows: np.ndarray, order: tuple[str | None, bool] | None = None) -> None:
        self.rows = rows
        if order is not None:
            self.shown_order = order
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        self.cursor = min(self.cursor, max(len(rows) - 1, 0))
        self.refresh()

    @property
    def row_count(self) -> int:
        """How many rows are shown (after the filter)."""
        return len(self.rows)

    def path_at(self, row: int) -> str | None:
        """The path shown on row `row` (0 is the first leaf row), or None."""
        if self.index is None or not 0 <= row < len(self.rows):
            return None
        return self.index.paths[int(self.rows[row])]

    # --- layout ------------------------------------------------------------------------

    def _natural_widths(self) -> dict[str, int]:
        widths = dict(_MAX_WIDTHS)
        index = self.index
        if index is not None and len(index):
            sample = range(min(len(index), 2_000))
            for col in ("type", "dtype", "device"):
                values = index.column(col)
                cells = max(cell_len(safe(values[i])) for i in sample)
                title = len(dict(COLUMNS)[col]) + 2
                widths[col] = max(title, min(_MAX_WIDTHS[col], cells))
        return widths

    def _widths(self) -> list[tuple[str, int]]:
        total = self.scrollable_content_region.width or self.size.width
        widths = self._widths_cache
        shown = [c for c, _ in COLUMNS if c != "path"]
        for col in _DROP_ORDER:
            if total - sum(widths[c] + 1 for c in shown) >= _MIN_PATH:
                break
            shown.remove(col)
        path_w = max(8, total - sum(widths[c] + 1 for c in shown))
        return [
            (c, path_w if c == "path" else widths[c])
            for c, _ in COLUMNS
            if c == "path" or c in shown
        ]

    @staticmethod
    def _fit(text: str, width: int, right: bool, middle: bool) -> str:
        """Pad or cut a cell to `width` terminal cells (rich's `cell_len`: CJK and emoji take
        two, combining marks none); paths are cut in the middle, so both the root-most step
        (which subtree) and the leaf-most steps (which parameter) stay visible.

        Example:
            >>> LeavesTable._fit("重みw", 6, False, False), LeavesTable._fit("ab", 4, True, False)
            ('重みw ', '  ab')
        """
        cells = cell_len(text)
        if cells > width:
            if middle and width > 8:
                head = (width - 1) // 3
                text = _head_cells(text, head) + "…" + _tail_cells(text, width - 1 - head)
            else:
                text = _head_cells(text, width - 1) + "…"
            cells = cell_len(text)
        pad = " " * max(0, width - cells)
        return pad + text if right else text + pad

    def render_line(self, y: int) -> Strip:
        widths = self._widths()
        width = self.scrollable_content_region.width or self.size.width
        if y == 0:
            style = self.get_component_rich_style("leaves-table--header")
            cells = []
            titles = dict(COLUMNS)
            for col, w in widths:
                title = titles[col]
                mark = ""
                shown_col, shown_rev = self.shown_order
                if col == shown_col:
                    mark = " ▼" if shown_rev else " ▲"
                cells.append(self._fit(title + mark, w, col in _RIGHT, False))
            segs = [Segment(" ".join(cells), style)]
            return Strip(segs).adjust_cell_length(width, style)
        row = int(self.scroll_offset.y) + y - 1
        base = self.rich_style
        if self.index is None:
            if y == 1:
                return Strip(
                    [Segment("indexing leaves…", base + Style(italic=True, dim=True))]
                ).adjust_cell_length(width, base)
            return Strip.blank(width, base)
        if row >= len(self.rows):
            return Strip.blank(width, base)
        i = int(self.rows[row])
        if row == self.cursor:
            style = base + self.get_component_rich_style("leaves-table--cursor")
        elif row % 2:
            style = base + self.get_component_rich_style("leaves-table--odd")
        else:
            style = base
        segs = []
        index = self.index
        for n, (col, w) in enumerate(widths):
            if n:
                segs.append(Segment(" ", style))
            # file-derived names go straight into segments: escape their control characters
            text = self._fit(safe(index.cell(col, i)), w, col in _RIGHT, col == "path")
            segs.append(Segment(text, style + self._cell_style(col, i)))
        return Strip(segs).adjust_cell_length(width, style)

    def _cell_style(self, col: str, i: int) -> Style:
        from treetool._lowering._labels import dtype_style

        if col in ("type", "dtype") and self.index is not None:
            return Style.parse(dtype_style(self.index.dtypes[i]))
        if col in _RIGHT:
            return Style(dim=True)
        return Style()

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, len(self.rows) + 1)

    # --- cursor ------------------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        page = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_offset.y)
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + page:
            self.scroll_to(y=new - page + 1, animate=False, immediate=True)
        self.refresh()
        path = self.path_at(new)
        if path is not None and self.has_focus:
            self.post_message(self.Highlighted(path))

    def on_focus(self) -> None:
        path = self.path_at(self.cursor)
        if path is not None:
            self.post_message(self.Highlighted(path))

    def watch_sort_column(self) -> None:
        self._apply_order()

    def watch_sort_reverse(self) -> None:
        self._apply_order()

    def action_cursor(self, delta: int) -> None:
        """Move the cursor by `delta` rows."""
        self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        """Move the cursor one page up or down."""
        self.action_cursor(direction * max(1, self.scrollable_content_region.height - 2))

    def action_edge(self, end: int) -> None:
        """Move to the first (0) or last (1) row."""
        self.cursor = max(0, len(self.rows) - 1) if end else 0

    def action_sort_next(self) -> None:
        """Sort by the next column (leaf order after the last one)."""
        ids = [c for c, _ in COLUMNS]
        if self.sort_column is None:
            self.sort_column = ids[0]
        else:
            i = ids.index(self.sort_column) + 1
            self.sort_column = ids[i] if i < len(ids) else None

    def sort_by(self, column: str | None, reverse: bool = False) -> None:
        """Sort by a column id (None: leaf order)."""
        self.set_reactive(LeavesTable.sort_reverse, reverse)
        self.set_reactive(LeavesTable.sort_column, column)
        self._apply_order()

    def action_sort_key(self, column: str) -> None:
        """Sort by `column`: numbers largest first, text A to Z; the same key again reverses."""
        if column == self.sort_column:
            self.sort_by(column, not self.sort_reverse)
        else:
            self.sort_by(column, column in _RIGHT)

    def action_reverse(self) -> None:
        """Reverse the current sort."""
        self.sort_reverse = not self.sort_reverse

    def action_choose(self) -> None:
        """Show the leaf under the cursor in the Tree tab."""
        path = self.path_at(self.cursor)
        if path is not None:
            self.post_message(LeafChosen(path))

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            x = event.x
            for col, w in self._widths():
                if x < w + 1:
                    if col == self.sort_column:
                        self.sort_reverse = not self.sort_reverse
                    else:
                        self.sort_by(col)
                    return
                x -= w + 1
            return
        row = int(self.scroll_offset.y) + event.y - 1
        if 0 <= row < len(self.rows):
            if row == self.cursor and event.chain > 1:
                self.action_choose()
            self.cursor = row
