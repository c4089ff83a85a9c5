"""Plain text of a renderable, and the line width output gets.

`print(tt.render(x))`, `print(tt.summary(x))` and `print(tt.diff(a, b))` all draw through
`to_text`, at the width `output_width` gives: `COLUMNS` when set, the terminal's width on a
terminal, and otherwise no wrapping at all (a pipe or a log gets whole lines, never breaks at
80 columns mid-phrase).
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from typing import Any

__all__ = ["NO_WRAP", "output_width", "to_text"]

#: the width used when nothing asks for one: wide enough that no line wraps
NO_WRAP = 10_000


def output_width(stream: Any = None) -> int:
    """`COLUMNS` if set, the terminal's width if `stream` (stdout) is one, else `NO_WRAP`.

    Example:
        >>> import os
        >>> os.environ["COLUMNS"] = "120"; output_width()
        120
        >>> del os.environ["COLUMNS"]
    """
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    stream = sys.stdout if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return shutil.get_terminal_size().columns
    return NO_WRAP


def to_text(renderable: Any, width: int | None = None) -> str:
    """The renderable drawn as plain text (no colours, no trailing newline).

    Example:
        >>> from rich.text import Text
        >>> to_text(Text("a  "))
        'a'
    """
    console = _plain_console(width if width is not None else output_width())
    console.print(renderable)
    text = console.file.getvalue()
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())


def _plain_console(width: int) -> Any:
    from rich.console import Console

    return Console(
        file=io.StringIO(),
        width=width,
        color_system=None,
        highlight=False,
        soft_wrap=False,
        markup=False,
        emoji=False,
    )
