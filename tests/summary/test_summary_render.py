"""The summary table drawn directly (`_summary._rich._Grid`) is byte for byte the table rich
draws from the same cells, colours included, at every width; it falls back to rich's table
when the console is too narrow for it."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from treetool._summary._rich import _COLUMNS, _ERRORS, _Grid, summary_table
from treetool._summary._summary import summary
from treetool._text import safe

COLUMNS, ERRORS = list(_COLUMNS), _ERRORS


def _console(buf: io.StringIO, colors: str | None, width: int) -> Console:
    return Console(
        file=buf,
        force_terminal=colors is not None,
        color_system=colors,  # type: ignore[arg-type]
        width=width,
        highlight=False,
        soft_wrap=False,
        markup=False,
        emoji=False,
    )


def _drawn(obj: object, colors: str | None, width: int) -> str:
    buf = io.StringIO()
    _console(buf, colors, width).print(obj)
    return buf.getvalue()


# cells as the summary makes them: text through `safe` (escapes, wide characters, brackets)
_cell = st.text(st.sampled_from("ab_.[]'0 ×é权\\\x1b\n/\u0301\u200b\u3000"), max_size=14).map(safe)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.lists(_cell, min_size=8, max_size=8), max_size=6),
    footer=st.lists(_cell, min_size=8, max_size=8),
    errors=st.booleans(),
)
def test_the_grid_draws_the_bytes_rich_draws(
    rows: list[list[str]], footer: list[str], errors: bool
) -> None:
    n = 8 if errors else 7
    grid = _Grid(COLUMNS + [ERRORS] * errors, [r[:n] for r in rows], footer[:n])
    for colors in (None, "standard", "truecolor"):
        for width in (12, 40, 80, 200):
            assert _drawn(grid, colors, width) == _drawn(grid.table(), colors, width)


def _parts(grid: _Grid, width: int) -> list[object]:
    console = _console(io.StringIO(), None, width)
    return list(grid.__rich_console__(console, console.options))


def test_the_grid_is_drawn_by_rich_only_when_the_console_is_too_narrow() -> None:
    tree = {f"layer_{i}": {"w": np.zeros((4, 3), np.float32)} for i in range(1000)}
    (grid,) = [x for x in summary_table(summary(tree)) if isinstance(x, _Grid)]
    assert len(grid.rows) == 1000
    wide = _parts(grid, 100)
    assert not any(isinstance(x, Table) for x in wide)
    assert sum(getattr(x, "text", None) == "\n" for x in wide) == 1002  # header, rows, total
    narrow = _parts(grid, 30)
    assert len(narrow) == 1 and isinstance(narrow[0], Table)
    text = _drawn(grid, None, 100).splitlines()
    assert text[0].split() == ["path", "type", "leaves", "params", "%", "bytes", "dtypes"]
    assert text[1].split() == ["['layer_0']", "dict", "1", "12", "0.1%", "48", "B", "float32"]
    assert text[-1].split() == [
        "total",
        "dict",
        "1,000",
        "12.0K",
        "100%",
        "48.0",
        "KB",
        "float32×1000",
    ]
    # a type name that ends in a space (a pickled class can be named anything): rich draws it
    assert isinstance(
        _parts(_Grid(COLUMNS, [["a", "T ", "1", "1", "", "1 B", ""]], [""] * 7), 200)[0], Table
    )
