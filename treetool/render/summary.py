"""Rich table of a `Summary`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .._summary import Summary
from .._text import safe, safe_text
from ._registry import register
from .labels import fmt_bytes, fmt_count

__all__ = ["summary_table"]


def _dtypes(c: Any) -> str:
    return safe(", ".join(f"{k}×{v}" if v > 1 else k for k, v in c.most_common()))


def summary_table(s: Any) -> Iterator[Any]:
    """The rows of a Summary as a table, then a line per tied array.

    Every cell is a plain `Text` through `safe`: a class named `Y[/]` is shown, not parsed.
    """
    t = Table(box=None, header_style="bold", pad_edge=False, show_footer=True)
    total = s.total
    t.add_column("path", footer="total", overflow="fold")
    t.add_column("type", footer=safe_text(total.type), style="magenta", overflow="fold")
    t.add_column("leaves", justify="right", footer=fmt_count(total.leaves))
    t.add_column("params", justify="right", footer=fmt_count(total.params))
    t.add_column("%", justify="right", footer="100%" if total.params else "")
    t.add_column("bytes", justify="right", footer=fmt_bytes(total.nbytes))
    t.add_column("dtypes", footer=safe_text(_dtypes(total.dtypes)), style="cyan")
    if total.errors:
        t.add_column("errors", justify="right", footer=fmt_count(total.errors), style="red")
    for r in s.rows:
        pct = f"{100 * r.params / total.params:.1f}%" if total.params else ""
        t.add_row(
            safe_text(r.path or "(root)"),
            safe_text(r.type),
            fmt_count(r.leaves),
            fmt_count(r.params),
            pct,
            fmt_bytes(r.nbytes),
            Text(_dtypes(r.dtypes)),
            *([fmt_count(r.errors) if r.errors else ""] if total.errors else []),
        )
    yield t
    for path, message in s.errors:
        yield Text(f"error: {safe(path or '(root)')}: {safe(message)}", style="bold red")
    for paths, params in s.tied:
        yield Text(
            f"tied: one array at {len(paths)} paths ({safe(', '.join(paths))}), "
            f"{fmt_count(params)} params counted once in the total",
            style="yellow",
        )


def _summary_rich(s: Summary, **_: Any) -> Group:
    return Group(*summary_table(s))


register(Summary, rich=_summary_rich)
