"""Rich table of a `Summary`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from treetool._lowering._labels import fmt_bytes, fmt_count
from treetool._text import safe

if TYPE_CHECKING:  # the result module imports this one, never the other way round
    pass

__all__ = ["summary_table"]


def _dtypes(c: Any) -> str:
    return safe(", ".join(f"{k}×{v}" if v > 1 else k for k, v in c.most_common()))


#: a column: its header, how it is justified, its style (none: "")
_Column = tuple[str, str, str]


#: the summary's columns; `_ERRORS` joins them when some node could not be opened
_COLUMNS: tuple[_Column, ...] = (
    ("path", "left", ""),
    ("type", "left", "magenta"),
    ("leaves", "right", ""),
    ("params", "right", ""),
    ("%", "right", ""),
    ("bytes", "right", ""),
    ("dtypes", "left", "cyan"),
)
_ERRORS: _Column = ("errors", "right", "red")


class _Grid:
    """The summary's table as rich's `Table(box=None, pad_edge=False)` draws it, made
    directly when every cell fits on its line: the same segments, so the same bytes, colours
    included. Rich measures, pads and renders each cell as a renderable of its own, about
    0.6 ms a row (a checkpoint of 1,000 top-level entries took 0.6 s to print); this costs a
    few microseconds a row. A table wider than the console (rich folds its cells), or with a
    cell that starts or ends in a space (rich justifies it without), is drawn by rich itself.

    Every cell is plain text that went through `safe`: never parsed as markup.
    """

    __slots__ = ("columns", "footer", "rows")

    def __init__(self, columns: list[_Column], rows: list[list[str]], footer: list[str]) -> None:
        self.columns, self.rows, self.footer = columns, rows, footer

    def table(self) -> Table:
        """The same table, as a rich `Table` (which folds cells to fit a narrow console)."""
        t = Table(box=None, header_style="bold", pad_edge=False, show_footer=True)
        for (header, justify, style), footer in zip(self.columns, self.footer):
            fold = "fold" if header in ("path", "type") else "ellipsis"
            t.add_column(header, footer=Text(footer), justify=justify, style=style, overflow=fold)  # type: ignore[arg-type]
        for row in self.rows:
            t.add_row(*(Text(cell) for cell in row))
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        lines = [[h for h, _, _ in self.columns], *self.rows, self.footer]
        n = len(self.columns)
        widths = [max(cell_len(line[i]) for line in lines) for i in range(n)]
        if sum(widths) + 2 * (n - 1) > options.max_width or any(
            cell[:1].isspace() or cell[-1:].isspace() for line in lines for cell in line
        ):  # rich folds cells to fit, and justifies a cell's text without its outer spaces
            yield self.table()
            return
        head, foot = console.get_style("bold"), console.get_style("table.footer")
        body = [console.get_style(style) if style else Style() for _, _, style in self.columns]
        right = [justify == "right" for _, justify, _ in self.columns]
        new_line, last = Segment.line(), len(lines) - 1
        for k, line in enumerate(lines):
            for i, cell in enumerate(line):
                style = head if k == 0 else foot if k == last else body[i]
                pad = " " * (widths[i] - cell_len(cell))
                if i:
                    yield Segment(" ", style)
                yield Segment(pad + cell if right[i] else cell + pad, style)
                if i < n - 1:
                    yield Segment(" ", style)
            yield new_line


def summary_table(s: Any) -> Iterator[Any]:
    """The rows of a Summary as a table, then a line per tied array.

    Every cell is plain text through `safe`: a class named `Y[/]` is shown, not parsed.
    """
    total = s.total
    columns = list(_COLUMNS)
    footer = [
        "total",
        safe(total.type),
        fmt_count(total.leaves),
        fmt_count(total.params),
        "100%" if total.params else "",
        fmt_bytes(total.nbytes),
        _dtypes(total.dtypes),
    ]
    if total.errors:
        columns.append(_ERRORS)
        footer.append(fmt_count(total.errors))
    rows = []
    listed = [*s.rows, s.more] if s.more is not None else s.rows  # capped: "N more" last
    for r in listed:
        row = [
            safe(r.path or "(root)"),
            safe(r.type),
            fmt_count(r.leaves),
            fmt_count(r.params),
            f"{100 * r.params / total.params:.1f}%" if total.params else "",
            fmt_bytes(r.nbytes),
            _dtypes(r.dtypes),
        ]
        if total.errors:
            row.append(fmt_count(r.errors) if r.errors else "")
        rows.append(row)
    yield _Grid(columns, rows, footer)
    for path, message in s.errors:
        yield Text(f"error: {safe(path or '(root)')}: {safe(message)}", style="bold red")
    for paths, params in s.tied:
        yield Text(
            f"tied: {len(paths)} paths share memory ({safe(', '.join(paths))}), "
            f"{fmt_count(params)} params counted once in the total",
            style="yellow",
        )
